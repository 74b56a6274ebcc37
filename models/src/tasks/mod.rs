//! Tasks own a graph's I/O contract: input and output names, dtypes and shapes.

pub mod causal_lm;
