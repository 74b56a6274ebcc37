//! `tailor`: build ONNX models from Hugging Face checkpoints, tailored to an ONNX Runtime
//! execution provider.

use builder::{build, materialize_demo_checkpoint, BuildRequest, MAX_THREADS};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ep_sets::EpSets;
use ir::DType;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tailor",
    version,
    about = "Build ONNX models from Hugging Face checkpoints, tailored to an ONNX Runtime execution provider.",
    long_about = "Build ONNX models from Hugging Face checkpoints, tailored to an ONNX Runtime execution provider.\n\n\
        A build reads a checkpoint folder (config.json, *.safetensors, tokenizer files), builds one\n\
        EP-agnostic graph in standard ONNX (opset 24), and writes a package folder that ONNX Runtime\n\
        and onnxruntime-genai load: model.onnx, model.onnx.data, genai_config.json, tokenizer files.\n\n\
        Try it with the demo checkpoint built into the binary:\n    tailor build\n\
        which writes ./tailor-demo."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--quant-method`: how block scales and zero points are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum QuantMethodArg {
    Rtn,
    Mse,
    Hqq,
}

impl QuantMethodArg {
    fn method(self) -> ir::quant::Method {
        match self {
            QuantMethodArg::Rtn => ir::quant::Method::Rtn,
            QuantMethodArg::Mse => ir::quant::Method::MseSearch,
            QuantMethodArg::Hqq => ir::quant::Method::Hqq,
        }
    }
}

#[derive(Subcommand)]
// Parsed once per run: the size of `Build`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Build a package from a checkpoint folder.
    #[command(after_help = "Examples:\n  tailor build                                   # the demo checkpoint -> ./tailor-demo\n  \
        tailor build --model ./Qwen2.5-0.5B --output ./qwen-onnx\n  \
        tailor build --model ./llama --output ./llama-onnx --dtype f16 --force\n  \
        tailor build --model ./qwen --output ./qwen-cpu --ep cpu --explain   # why each fusion did or did not happen\n\n\
        Each --ep is a table in ep-sets/tables/ (docs/ep-tables.md) listing the dtypes it builds, the\n\
        rules it applies and the kernels it runs; a fusion the table requires that does not happen\n\
        fails the build with the rule's check message (docs/pipeline.md).\n\n\
        The package is written to a staging folder beside OUTPUT and swapped into place in one\n\
        atomic rename: a failed or interrupted build (Ctrl-C, SIGTERM) leaves nothing behind and\n\
        never touches an existing OUTPUT. --force replaces only an empty folder or an earlier\n\
        package of this tool; two builds of one OUTPUT at once: the second fails.\n\n\
        A pre-quantized checkpoint (GPTQ, AWQ GEMM, gpt-oss's MXFP4 experts: config.json's\n\
        quantization_config) is imported with its own integers, scales and zero points as\n\
        MatMulNBits or QMoE (DequantizeLinear + MatMul on `default`; MXFP4 experts as exact 8-bit\n\
        QMoE codes on cpu, their float dequantization where the table does not fuse the MoE),\n\
        never requantized; its float layers, lm_head included, stay float unless\n\
        --quant-lm-head / --quant-embeddings ask; --quant is refused (docs/quantization.md).")]
    #[command(group(clap::ArgGroup::new("quantizing").multiple(true).args(["quant", "quant_lm_head", "quant_embeddings", "requantize_experts"])))]
    Build {
        /// Checkpoint folder with config.json and *.safetensors (sharded checkpoints need
        /// model.safetensors.index.json), or a Hugging Face model id (`Qwen/Qwen2.5-0.5B`) found
        /// in the local hub cache (HF_HUB_CACHE, else HF_HOME/hub, else
        /// $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub) or, when not cached,
        /// downloaded into it (configs, the safetensors a build reads (the shards the index
        /// names, else model.safetensors) and tokenizer files only; HF_ENDPOINT and
        /// HF_TOKEN honoured; HF_HUB_OFFLINE=1 forbids it; HF_HUB_ETAG_TIMEOUT for the file
        /// list and HF_HUB_DOWNLOAD_TIMEOUT for each file: seconds a connect or read may wait,
        /// default 10, three attempts). Or a llama.cpp GGUF file (FILE.gguf, or a folder
        /// without config.json holding one; a split model by its PREFIX-00001-of-0000N.gguf
        /// file, the others read from beside it) whose `general.architecture` is llama (Mixtral's
        /// experts included), qwen2, qwen2moe, qwen3, qwen3moe, qwen2vl, qwen3vl and qwen3vlmoe (their text models), deepseek2 (DeepSeek-V2 and V3;
        /// Youtu-LLM without experts),
        /// glm4moe (GLM-4.5 to 4.7), dots1, olmoe, ernie4_5-moe, hunyuan-moe (Hunyuan-A13B), hunyuan-dense, granitemoe (GraniteMoeShared too),
        /// exaone-moe (K-EXAONE), minimax-m2 (MiniMax-M2), afmoe (Arcee Trinity), mistral4 (Mistral 4),
        /// phi3, phimoe (Phi-3.5-MoE), gemma, gemma2, gemma3,
        /// granite, olmo, olmo2 (OLMo 3 included), starcoder2, phi2, smollm3, glm4, ernie4_5,
        /// nemotron, seed_oss, arcee, exaone (EXAONE 3 / 3.5), exaone4, command-r, cohere2, stablelm, mistral3 (Ministral 3), apertus, gptneox (Pythia), gpt2, starcoder (StarCoder 1),
        /// falcon (Falcon-7B, Falcon2-11B), bloom (BLOOM, BLOOMZ), mpt (MPT-7B, MPT-30B), dbrx (DBRX), minicpm (MiniCPM-2B, MiniCPM4), jais2 (Jais 2), minicpm3 (MiniCPM3), mellum (Mellum2), hy_v3 (Hy3),
        /// granite_swa (GraniteSWA, GraniteMoeSWA), chatglm (GLM-4-9B-chat) or gpt-oss,
        /// or bert (an encoder: sentence-embedding with the file's pooling, else feature-extraction):
        /// config and tokenizer from its metadata,
        /// its quantized tensors kept as they are (docs/quantization.md). A hub repository of
        /// GGUF files takes the model's quantization as a tag, `ORG/NAME:Q4_K_M` (as llama.cpp's
        /// -hf): the file, or split set, whose name (without `.gguf` and the split suffix) ends
        /// with `-Q4_K_M`, `.Q4_K_M` or `_Q4_K_M` or is `Q4_K_M`, in any case, is downloaded,
        /// nothing else; without a tag, a repository of one GGUF model gives that one, and one
        /// of several is refused listing their tags. Without --model, the
        /// built-in demo checkpoint is used.
        #[arg(long, value_name = "DIR|FILE.gguf|ID|ID:TAG")]
        model: Option<PathBuf>,
        /// With a hub model id: the branch, tag (a git ref name such as `v1.0`, `refs/pr/1`)
        /// or 40-hex-digit commit to build (default main).
        #[arg(long, value_name = "REV", requires = "model")]
        revision: Option<String>,
        /// Package folder to write. Defaults to ./tailor-demo for the demo checkpoint.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// Execution provider the package is tailored to: one of the EP tables compiled into
        /// this binary (`default` = portable standard ONNX).
        // Its possible values are set from those tables in `main` (`ep_values`).
        #[arg(long, default_value = "default")]
        ep: String,
        /// What the package computes: `causal-lm` (decoders: logits with a KV cache, for
        /// onnxruntime-genai), `feature-extraction` (encoders: last_hidden_state) or
        /// `sentence-embedding` (encoders: last_hidden_state and the pooled (normalized where
        /// they say so) sentence_embedding, as the checkpoint's sentence-transformers files, or
        /// a bert GGUF file's pooling_type, say). Default: from the checkpoint (a
        /// sentence-transformers folder or a GGUF file with a pooling gives sentence-embedding,
        /// another BERT-family checkpoint feature-extraction, a decoder causal-lm).
        #[arg(long, value_name = "TASK", value_parser = parse_task)]
        task: Option<models::tasks::Task>,
        /// Element type of activations (and of float weights): f32, f16 or bf16. Default: the EP
        /// table's (`default_dtype`; with --quant, its [quant.*] section's): f32 for cpu and
        /// default, f16 for cuda, dml, webgpu and trt-rtx.
        #[arg(long, value_parser = parse_dtype)]
        dtype: Option<DType>,
        /// Weight-only quantization of MatMul weights (and, per EP defaults, the lm_head and the
        /// embeddings): int4 or int8. Absent: float weights. The form follows the EP table:
        /// com.microsoft MatMulNBits / GatherBlockQuantized, or standard DequantizeLinear +
        /// MatMul for `default` (docs/quantization.md).
        // Its long help lists every table's defaults (`quant_help`).
        #[arg(long, value_name = "BITS", value_parser = parse_bits, help_heading = "Quantization")]
        quant: Option<ep_sets::QuantBits>,
        /// Weights per quantization block along K: a power of two from 16 to 256.
        #[arg(long, default_value_t = 32, value_name = "N", value_parser = parse_block_size, requires = "quantizing", help_heading = "Quantization")]
        block_size: usize,
        /// Asymmetric blocks (uint4/uint8 with zero points) instead of symmetric ones. Where the
        /// EP's DequantizeLinear takes no uint4 (trt-rtx), int4 codes against the mid point plus
        /// each block's offset after the MatMul (docs/quantization.md, "Zero points as offsets").
        #[arg(long, requires = "quantizing", help_heading = "Quantization")]
        asymmetric: bool,
        /// MatMulNBits' accuracy_level: 0 (unset), 1 (f32), 2 (f16), 3 (bf16), 4 (int8: the
        /// activations are quantized per block inside the kernel, faster, about 1e-2 further
        /// from the float result). Default: the EP table's (cpu and webgpu 4, others 0). Also
        /// applies to a pre-quantized checkpoint's imported weights (no --quant needed).
        #[arg(long, value_name = "N", value_parser = parse_accuracy_level, help_heading = "Quantization")]
        accuracy_level: Option<i64>,
        /// Quantize the lm_head: int4, int8 or none. Default: the EP table's (cpu: as --quant);
        /// for a pre-quantized checkpoint whose lm_head is float, none (give it without --quant).
        #[arg(long, value_name = "BITS", value_parser = parse_choice, help_heading = "Quantization")]
        quant_lm_head: Option<ep_sets::QuantChoice>,
        /// Quantize the embedding table: int4, int8 or none. GatherBlockQuantized where the EP
        /// has it, HQQ's float zero points (and a GGUF type's min) added to its rows after it;
        /// where it cannot read the table (dml has none; rows that are not whole blocks), the
        /// rows are decoded from the MatMulNBits bytes with standard ops, which webgpu cannot
        /// run (there such a table stays float, or is refused when asked for). On `default` the
        /// rows are gathered from the head's DequantizeLinear table (4-bit rows, or rows with
        /// float offsets, as bytes decoded with standard ops, ONNX Gather having no int4) and
        /// only they are dequantized. A tied head and table store one copy. Default: the EP
        /// table's (cpu: as --quant; default: none); for a pre-quantized checkpoint, none (its
        /// quantized table keeps its integers where a form exists).
        #[arg(long, value_name = "BITS", value_parser = parse_choice, help_heading = "Quantization")]
        quant_embeddings: Option<ep_sets::QuantChoice>,
        /// For a pre-quantized checkpoint (GGUF, GPTQ, AWQ) whose experts QMoE cannot hold with
        /// their own integers (GGUF types with a minimum per block, as the Q4_K experts of most
        /// Q4_K_M files; act-order GPTQ): quantize those experts again (RTN, asymmetric,
        /// --block-size) as int4 or int8 QMoE instead of writing them float, which is exact but
        /// several times the file's size. Not exact: the report gives each stack's weight
        /// error and its source ("requantized from gguf:Q4_K"). int8 stays close (tiny
        /// Qwen2-MoE Q4_1 file: logits 1e-2 relative to its dequantization, int8 activations
        /// included); int4 is another 4-bit grid (1.5e-1 there). Default none.
        #[arg(long, value_name = "BITS", value_parser = parse_choice, help_heading = "Quantization")]
        requantize_experts: Option<ep_sets::QuantChoice>,
        /// Keep the weights read from a checkpoint tensor whose name matches PATTERN float (`*`
        /// and `?` wildcards, e.g. 'model.layers.0.*' or '*.down_proj.weight'; a packed QKV
        /// weight stays float whole when q, k or v matches); repeatable. A pattern matching no
        /// weight is an error.
        #[arg(long, value_name = "PATTERN", requires = "quant", help_heading = "Quantization")]
        quant_exclude: Vec<String>,
        /// How block scales (and zero points) are chosen: `rtn` (round to nearest from the block's
        /// range: the bytes ONNX Runtime's own quantizer writes), `mse` (searches scales for a
        /// lower weight error, no calibration data, about 50x slower to quantize) or `hqq`
        /// (ONNX Runtime's half-quadratic solver: RTN's scales with a float zero point per block,
        /// asymmetric, written as codes against the mid point plus each block's offset added
        /// after the MatMul, on every table; a tied head and embedding share one table). HQQ costs
        /// 6 bits per value against RTN's 5 at block 32: SmolLM2-135M int4 is 1.20x RTN's size
        /// (1.36x with --quant-lm-head int8 --quant-embeddings int8, whose passage NLL is within
        /// 0.006 of the float model's; the int4 head costs 0.08), builds about 7-10x slower than
        /// rtn (a 0.5B model: 7 s against 0.8 s) in less peak memory than rtn, and decodes about
        /// 0.8x as fast (measured, docs/quantization.md, "HQQ").
        #[arg(long, default_value = "rtn", value_name = "METHOD", value_enum, requires = "quantizing", help_heading = "Quantization")]
        quant_method: QuantMethodArg,
        /// Replace OUTPUT when it holds an earlier package of this tool (its build_report.json
        /// and only the files that report lists), once the new package is complete. Any other
        /// non-empty folder is refused, and so is one holding a file the checkpoint reads.
        #[arg(long)]
        force: bool,
        /// For tied embeddings: `shared` reads the embedding through a Transpose node (smaller
        /// package, faster build; ONNX Runtime transposes it when a session is created), `copy`
        /// stores a transposed lm_head (larger package, fastest session creation).
        #[arg(long, default_value = "shared", value_parser = parse_tied_head)]
        tied_head: models::TiedHead,
        /// The decoder's KV cache: `dynamic` (past/present grow every step) or `static` (one
        /// preallocated [batch, kv_heads, N, head_dim] buffer per layer, written in place with
        /// TensorScatter (default) or by GroupQueryAttention (cpu, cuda); fixed shapes, no
        /// control flow; onnxruntime-genai shares past and present). `static` needs
        /// --max-length and a table that offers it (see `[kv_cache.static]` in
        /// ep-sets/tables/EP.toml).
        #[arg(long, default_value = "dynamic", value_name = "FORM", value_parser = ["dynamic", "static"])]
        kv_cache: String,
        /// With --kv-cache static: the cache length N, the longest prompt plus generated tokens
        /// a sequence can reach (genai_config.json's max_length); at least 1, at most the
        /// checkpoint's max_position_embeddings.
        #[arg(long, value_name = "N", value_parser = parse_max_length)]
        max_length: Option<usize>,
        /// Threads producing model.onnx.data's blocks (0 = one per core; two more write them;
        /// at most 64). The output is byte-identical whatever the count; fewer threads use less
        /// memory.
        #[arg(long, default_value_t = 0, value_name = "N", value_parser = parse_threads)]
        threads: usize,
        /// Print one diagnostic record per candidate node and rule: fired, or which check
        /// failed and why (also with TAILOR_EXPLAIN=1).
        #[arg(long)]
        explain: bool,
        /// How diagnostics are printed: `text` for people, `json` (on stdout) for tools: one
        /// document with `ep`, `dtype`, `ok`, `error` and the pipeline's report, also when the
        /// build fails.
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        diag_format: String,
        /// Fail instead of warning, before anything is written: tokenizer files missing,
        /// unreadable or broken in the checkpoint (genai will not load the package), left
        /// padding the table's attention cannot take, expert stacks a --quant build keeps float.
        #[arg(long)]
        strict: bool,
        /// A LoRA adapter (a PEFT folder: adapter_config.json, adapter_model.safetensors) to
        /// serve from this package as NAME; repeatable. The decoder gets one LoRA slot per
        /// projection any adapter targets (q, k and v together), each with an empty default, so
        /// the package runs with no adapter, and each adapter is written to
        /// adapters/NAME.onnx_adapter for onnxruntime-genai's og.Adapters (docs/adapters.md).
        #[arg(long, value_name = "NAME=PEFT_DIR", value_parser = parse_lora, help_heading = "Adapters")]
        lora: Vec<builder::lora::LoraRequest>,
        /// For a vision-language checkpoint (config.json with `text_config` and
        /// `vision_config`): build its language model alone, a decoder package on input_ids
        /// (genai_config.json of the text model's type), the vision tower and projector left
        /// unread. The way to build one whose vision parts this tool does not make (Mistral 3:
        /// Ministral 3, Mistral Small 3.1/3.2, a `mistral4` text model; others whose `text_config` is a
        /// family listed here and spells out its sizes) as a text model, or a smaller text-only
        /// package of one it does (Gemma 3, Qwen2.5-VL, Qwen3-VL: their multimodal RoPE
        /// sections reduce to plain RoPE for text).
        #[arg(long)]
        text_only: bool,
    },
    /// Convert one more LoRA adapter (a PEFT folder) for a package built with --lora: written to
    /// PKG/adapters/NAME.onnx_adapter and listed in build_report.json. An adapter the package's
    /// slots do not take (a target with no slot, other widths, a malformed pair) is refused,
    /// naming the tensor, and nothing is written.
    #[command(after_help = "Examples:\n  tailor build --model ./llama --output ./pkg --lora chat=./chat-lora\n  \
        tailor adapter ./sql-lora --package ./pkg --name sql\n\n\
        Adapter folders are refused by key for what a slot y = base(x) + (x A) B cannot compute: use_dora,\n\
        bias other than none, modules_to_save, lora_bias.\n\
        A target on a fused projection (Phi-3 qkv_proj / gate_up_proj, GPT-2 c_attn, GLM gate_up_proj) fills the slots of its parts.")]
    Adapter {
        /// The PEFT adapter folder (adapter_config.json, adapter_model.safetensors).
        #[arg(value_name = "PEFT_DIR")]
        peft_dir: PathBuf,
        /// The package (what `tailor build --lora` wrote).
        #[arg(long, value_name = "PKG")]
        package: PathBuf,
        /// The adapter's name: its file is adapters/NAME.onnx_adapter, the name to load it under.
        #[arg(long)]
        name: String,
        /// Replace an adapter of that name.
        #[arg(long)]
        force: bool,
    },
    /// Show what a package holds before you ship it, part by part (a vision-language package:
    /// vision.onnx, embedding.onnx, model.onnx): file, role and plan, quantization, inputs and
    /// outputs (repeated ones folded: `past_key_values.{0..23}.key`), ops by domain, the
    /// fusions that fired, host-placed nodes, sizes, external data and the largest tensors, and
    /// whether genai_config.json's sections match the parts. Reads no weights, but checks that
    /// every tensor's external data lies inside the package and its file is long enough.
    #[command(after_help = "Exit status: 0 when the package reads, 1 when it does not (a file that is missing, not a\n\
        regular file or not valid; external data that is truncated or lies outside the package:\n\
        the message names the tensor) or when the output cannot be written.\n\n\
        Examples:\n  tailor inspect ./qwen-int4\n  tailor inspect ./qwen-int4 --json | jq '.parts[].ops'")]
    Inspect {
        /// A package folder (what `tailor build --output` wrote).
        #[arg(value_name = "PACKAGE")]
        package: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare two packages part by part (matched by file; a part only one has is a
    /// difference): op counts, rules that fired in one only, inputs and outputs, tensors whose
    /// bytes differ (SHA-256, streamed), sizes. build_report.json (timings, paths) does not
    /// count.
    #[command(after_help = "Exit status: 0 when the packages mean the same model (same graph, same tensor bytes, same\n\
        genai_config.json), 1 when they differ, 2 on error: CI can gate on it.\n\n\
        Examples:\n  tailor diff ./qwen-cpu ./qwen-default\n  tailor diff ./before ./after --json")]
    Diff {
        #[arg(value_name = "A")]
        a: PathBuf,
        #[arg(value_name = "B")]
        b: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `--ep`'s possible values: one per builtin EP table, with its ONNX Runtime provider as the
/// help text. Taken from the tables rather than a list in code, so that `--help` and argument
/// checking follow `ep-sets/tables/` (adding an EP is adding a table).
fn ep_values(sets: &EpSets) -> clap::builder::PossibleValuesParser {
    let values = sets.names().map(|name| {
        let provider = sets.get(name).map(|t| t.provider.clone()).unwrap_or_default();
        clap::builder::PossibleValue::new(name.to_string()).help(provider)
    });
    clap::builder::PossibleValuesParser::new(values)
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::parse_plan(s).ok_or_else(|| format!("unsupported dtype `{s}`; choose one of {}", DType::plan_names()))
}

fn parse_task(s: &str) -> Result<models::tasks::Task, String> {
    models::tasks::Task::parse(s).ok_or_else(|| {
        let names: Vec<&str> = models::tasks::Task::ALL.iter().map(|t| t.name()).collect();
        format!("unknown task `{s}`; choose one of {}", names.join(", "))
    })
}

fn parse_bits(s: &str) -> Result<ep_sets::QuantBits, String> {
    ep_sets::QuantBits::parse(s).ok_or_else(|| format!("unknown quantization `{s}`; choose int4 or int8"))
}

fn parse_choice(s: &str) -> Result<ep_sets::QuantChoice, String> {
    ep_sets::QuantChoice::parse(s).ok_or_else(|| format!("`{s}`: choose int4, int8 or none"))
}

/// `--quant`'s long help: what every builtin table does with it, read from the tables.
fn quant_help(sets: &EpSets) -> String {
    let mut text = String::from(
        "Weight-only quantization of MatMul weights: int4 or int8. Absent: float weights.\n\
         Each EP table's [quant.*] section sets the form and the defaults (a flag overrides them):",
    );
    for name in sets.names() {
        let Some(t) = sets.get(name) else { continue };
        let plans: Vec<String> = t
            .quant_plans()
            .map(|q| {
                format!(
                    "{}: {}, activations {}, accuracy level {}, lm_head {}, embeddings {}",
                    q.bits,
                    q.format.name(),
                    q.dtype,
                    q.accuracy_level,
                    q.lm_head.name(),
                    q.embeddings.name()
                )
            })
            .collect();
        if plans.is_empty() {
            text.push_str(&format!("\n  {name}: no quantization"));
        }
        for p in plans {
            text.push_str(&format!("\n  {name} {p}"));
        }
    }
    text.push_str("\nSee docs/quantization.md; build_report.json records every quantized tensor's error.");
    text
}

/// `s` as a whole number up to `max`. Anything else says which it is: not a whole number
/// (`what` says what is expected), or one that is too large, with the limit (`limit`): a
/// number past the integer type (`99999999999999999999`) is too large too, not "not a number".
fn whole_number<T: std::str::FromStr<Err = std::num::ParseIntError> + PartialOrd>(s: &str, what: &str, max: T, limit: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(format!("`{s}` is too large: {limit}")),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(format!("`{s}` is too large: {limit}")),
        Err(_) => Err(format!("`{s}` is not {what}")),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    whole_number(s, &format!("a thread count; give a whole number from 0 to {MAX_THREADS}"), MAX_THREADS, &format!("the limit is {MAX_THREADS} threads; use 0 for one per core"))
}

fn parse_max_length(s: &str) -> Result<usize, String> {
    // The checkpoint's max_position_embeddings bounds it; a config dimension is at most
    // u32::MAX (models::config), so a larger number can never fit.
    match whole_number(s, "a cache length (a positive integer such as 2048)", u32::MAX as usize, "a cache length is at most the checkpoint's max_position_embeddings") {
        Ok(0) => Err("a static KV cache needs at least 1 slot".into()),
        other => other,
    }
}

/// `--block-size`: ir::quant checks the power of two and the range, with the value; only a
/// number too large to hold is refused here.
fn parse_block_size(s: &str) -> Result<usize, String> {
    let range = format!("a power of two from {} to {}", ir::quant::MIN_BLOCK, ir::quant::MAX_BLOCK);
    whole_number(s, &format!("a block size ({range})"), usize::MAX, &format!("a block size is {range}"))
}

/// `--accuracy-level`: 0 to 4, checked against the table with the value; only a number too
/// large to hold is refused here.
fn parse_accuracy_level(s: &str) -> Result<i64, String> {
    const LEVELS: &str = "MatMulNBits' accuracy level is 0 (unset), 1 (f32), 2 (f16), 3 (bf16) or 4 (int8)";
    whole_number(s, "an accuracy level: 0, 1, 2, 3 or 4", i64::MAX, LEVELS)
}

/// The KV cache form `--kv-cache` and `--max-length` ask for, or why they do not fit together.
fn kv_cache_of(form: &str, max_length: Option<usize>) -> Result<models::KvCache, String> {
    match (form, max_length) {
        ("static", Some(max_length)) => Ok(models::KvCache::Static { max_length }),
        ("static", None) => Err("--kv-cache static needs --max-length N: the fixed cache length (prompt plus generated tokens)".into()),
        (_, Some(_)) => Err("--max-length sizes a static KV cache; add --kv-cache static (a dynamic cache grows as needed)".into()),
        _ => Ok(models::KvCache::Dynamic),
    }
}

fn parse_lora(s: &str) -> Result<builder::lora::LoraRequest, String> {
    builder::lora::LoraRequest::parse(s)
}

fn parse_tied_head(s: &str) -> Result<models::TiedHead, String> {
    match s {
        "shared" => Ok(models::TiedHead::Shared),
        "copy" => Ok(models::TiedHead::Copy),
        _ => Err(format!("unknown tied-head mode `{s}`; choose shared or copy")),
    }
}

/// Writes to stderr without panicking: a closed pipe (`tailor ... 2>&1 | head`) must not stop
/// a build, and a failed write to stderr has nowhere to be reported, so its errors are
/// dropped. Stdout goes through [`print_out`].
macro_rules! say {
    (err, $($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Writes `text` and a newline to stdout and flushes it. A closed pipe (`tailor inspect |
/// head`) is not an error: the reader chose to stop. Any other failure (`> /dev/full`, a full
/// disk, an I/O error) is returned, and the command fails saying so: the output asked for is
/// lost.
fn print_out(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// The exit of a command whose stdout could not be written: the reason on stderr.
fn stdout_failed(e: &std::io::Error, code: u8) -> ExitCode {
    say!(err, "error: cannot write to standard output: {e}; the output was lost");
    ExitCode::from(code)
}

/// clap's help, version and usage errors: printed by clap, but a failed write to stdout
/// (`tailor --help > /dev/full`) fails the command instead of exiting 0.
fn clap_exit(e: clap::Error) -> ! {
    use std::io::Write;
    let code = e.exit_code();
    let printed = e.print().and_then(|()| std::io::stdout().flush());
    match printed {
        // Usage errors go to stderr, where a failed write has nowhere to be reported.
        Err(w) if !e.use_stderr() && w.kind() != std::io::ErrorKind::BrokenPipe => {
            say!(err, "error: cannot write to standard output: {w}; the output was lost");
            std::process::exit(if code == 0 { 1 } else { code });
        }
        _ => std::process::exit(code),
    }
}

fn main() -> ExitCode {
    // A file-size limit (`ulimit -f`) would otherwise kill the process with SIGXFSZ in the
    // middle of a write; ignored, the write fails with EFBIG and the build reports which file
    // it could not write, leaving nothing behind.
    // SAFETY: setting a signal's disposition to SIG_IGN before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    // SIGINT, SIGTERM and SIGHUP remove the staging folder and lock before the process exits.
    if let Err(e) = builder::install_signal_handlers() {
        say!(err, "warning: cannot watch for interrupts ({e}); an interrupted build may leave a staging folder beside the output");
    }
    let sets = match EpSets::builtin() {
        Ok(s) => s,
        Err(e) => {
            say!(err, "error: the EP tables compiled into this binary are invalid:\n{e}");
            return ExitCode::FAILURE;
        }
    };
    let command = Cli::command().mut_subcommand("build", |b| {
        b.mut_arg("ep", |a| a.value_parser(ep_values(&sets))).mut_arg("quant", |a| a.long_help(quant_help(&sets)))
    });
    let matches = command.try_get_matches().unwrap_or_else(|e| clap_exit(e));
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => clap_exit(e),
    };
    match cli.command {
        Command::Diff { a, b, json } => match builder::diff::diff(&a, &b) {
            Ok(d) => {
                let text = if json { serde_json::to_string_pretty(&d).unwrap_or_default() } else { d.text().trim_end().to_string() };
                match print_out(&text) {
                    Ok(()) => ExitCode::from(if d.same_model { 0 } else { 1 }),
                    Err(e) => stdout_failed(&e, 2),
                }
            }
            Err(e) => {
                say!(err, "error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Inspect { package, json } => match builder::inspect::inspect(&package) {
            Ok(i) => {
                let text = if json { serde_json::to_string_pretty(&i).unwrap_or_default() } else { i.text().trim_end().to_string() };
                match print_out(&text) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => stdout_failed(&e, 1),
                }
            }
            Err(e) => {
                say!(err, "error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Adapter { peft_dir, package, name, force } => match builder::lora::add_to_package(&peft_dir, &package, &name, force) {
            Ok(a) => {
                say!(
                    err,
                    "wrote {}: {} tensors, rank {}, scaling {}, targets {}",
                    a.file.display(),
                    a.report["tensors"],
                    a.report["rank"],
                    a.report["scaling"],
                    a.report["targets"].as_array().map_or(0, |t| t.len())
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                say!(err, "error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Build {
            model,
            revision,
            output,
            ep,
            task,
            dtype,
            force,
            tied_head,
            kv_cache,
            max_length,
            threads,
            explain,
            diag_format,
            strict,
            quant,
            block_size,
            asymmetric,
            accuracy_level,
            quant_lm_head,
            quant_embeddings,
            requantize_experts,
            quant_exclude,
            quant_method,
            lora,
            text_only,
        } => {
            // Without --quant, the other flags still make a request: a pre-quantized checkpoint
            // takes them for its float layers (a float one refuses them, saying why).
            let requantize_experts = requantize_experts.and_then(|c| c.bits());
            let asked = quant.is_some() || quant_lm_head.is_some() || quant_embeddings.is_some() || accuracy_level.is_some() || requantize_experts.is_some();
            let quant = asked.then(|| builder::QuantRequest {
                bits: quant,
                block_size,
                symmetric: !asymmetric,
                accuracy_level,
                lm_head: quant_lm_head,
                embeddings: quant_embeddings,
                exclude: quant_exclude,
                method: quant_method.method(),
                requantize_experts,
            });
            // The EP table picks the dtype a build names none of.
            let dtype = dtype
                .unwrap_or_else(|| sets.get(&ep).map_or(DType::F32, |t| t.default_dtype(quant.as_ref().and_then(|q| q.bits))));
            let json = diag_format == "json";
            let (demo_dir, _demo_guard);
            let (model_dir, output) = match model {
                Some(m) => {
                    let Some(out) = output else {
                        say!(err, "error: --output is required with --model (the folder to write the package to)");
                        return ExitCode::from(2);
                    };
                    match builder::hub::resolve_model(&m, revision.as_deref()) {
                        Ok(dir) => (dir, out),
                        Err(e) => {
                            say!(err, "error: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
                None => {
                    demo_dir = match tempfile::tempdir() {
                        Ok(d) => d,
                        Err(e) => {
                            say!(err, "error: cannot create a temporary folder for the demo checkpoint: {e}");
                            return ExitCode::FAILURE;
                        }
                    };
                    _demo_guard = builder::remove_on_interrupt(demo_dir.path());
                    if let Err(e) = materialize_demo_checkpoint(demo_dir.path()) {
                        say!(err, "error: {e}");
                        return ExitCode::FAILURE;
                    }
                    say!(err, "no --model given: building the built-in demo checkpoint (tiny-llama)");
                    (demo_dir.path().to_path_buf(), output.unwrap_or_else(|| PathBuf::from("tailor-demo")))
                }
            };
            let explain = explain || std::env::var("TAILOR_EXPLAIN").is_ok_and(|v| v == "1");
            let kv_cache = match kv_cache_of(&kv_cache, max_length) {
                Ok(k) => k,
                Err(e) => {
                    say!(err, "error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let req = BuildRequest { model_dir, output, ep, dtype, force, tied_head, kv_cache, threads, explain, strict, quant, task, lora, text_only };
            let result = build(&req, &mut |step| say!(err, "  {step}"));
            let reports: Vec<&builder::pipeline::PipelineReport> = match &result {
                Ok(r) => r.parts.iter().map(|p| &p.pipeline).collect(),
                Err(builder::Error::Validation { report, .. }) => vec![&**report],
                Err(_) => Vec::new(),
            };
            let mut json_lost = None;
            if json {
                json_lost = print_json(&req, &reports, result.as_ref().err()).err();
            } else {
                for p in &reports {
                    print_diagnostics(p, explain);
                }
            }
            match result {
                Ok(r) => {
                    let parts: Vec<String> = r
                        .parts
                        .iter()
                        .map(|p| format!("{} ({}): {} nodes, {} initializers, {} B + {} B of data", p.file, p.role, p.nodes, p.initializers, p.model_bytes, p.data_bytes))
                        .collect();
                    say!(
                        err,
                        "built {} in {:.2} s: {}; copied {}",
                        r.output.display(),
                        r.seconds,
                        parts.join("; "),
                        if r.copied_files.is_empty() { "no checkpoint files".to_string() } else { r.copied_files.join(", ") }
                    );
                    for p in &r.parts {
                        if let Some(worst) = p.quantized.iter().max_by(|a, b| a.rms_error.total_cmp(&b.rms_error)) {
                            say!(
                                err,
                                "quantized {} weights of {}; package {:.1} MB; largest weight error: {} (rms {:.3e}, max {:.3e}; every tensor in build_report.json)",
                                p.quantized.len(),
                                p.file,
                                r.bytes() as f64 / 1e6,
                                worst.weight,
                                worst.rms_error,
                                worst.max_abs_error
                            );
                        }
                    }
                    for note in &r.notes {
                        say!(err, "note: {note}");
                    }
                    for warning in &r.warnings {
                        say!(err, "warning: {warning}");
                    }
                    for p in r.parts.iter().filter(|p| !p.pipeline.host_nodes.is_empty()) {
                        say!(
                            err,
                            "note: the EP has no kernel for these {} nodes; its table places them on the CPU EP: {}",
                            p.role,
                            p.pipeline.host_nodes.join(", ")
                        );
                    }
                    match json_lost {
                        // The package is in place; the document asked for is not.
                        Some(e) => {
                            say!(err, "error: cannot write the --diag-format json document to standard output: {e}; the package {} was written", r.output.display());
                            ExitCode::FAILURE
                        }
                        None => ExitCode::SUCCESS,
                    }
                }
                Err(e) => {
                    say!(err, "error: {e}");
                    if let Some(lost) = json_lost {
                        say!(err, "error: cannot write the --diag-format json document to standard output: {lost}");
                    }
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The diagnostics as one JSON document on stdout, on success and on failure alike: the
/// build's EP and dtype, whether it succeeded, the error if not, and per part the pipeline
/// report (role, rules, per-node records with `--explain`, validation) when the pipeline ran.
/// A failed write other than a closed pipe is returned.
fn print_json(req: &BuildRequest, reports: &[&builder::pipeline::PipelineReport], error: Option<&builder::Error>) -> std::io::Result<()> {
    let mut doc = serde_json::Map::new();
    doc.insert("ep".into(), req.ep.clone().into());
    doc.insert("dtype".into(), req.dtype.name().into());
    doc.insert("ok".into(), error.is_none().into());
    doc.insert("error".into(), error.map(|e| e.to_string()).into());
    let parts: Vec<serde_json::Value> = reports.iter().filter_map(|r| serde_json::to_value(r).ok()).collect();
    doc.insert("parts".into(), parts.into());
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(doc)).unwrap_or_default();
    print_out(&text)
}

/// One line per rule and role on stderr, and per-node records with `--explain`. Without
/// `--explain`, only the rules that could have fired (`rules::RuleReport::could_fire`), with
/// the failures of their pattern's instances.
fn print_diagnostics(p: &builder::pipeline::PipelineReport, explain: bool) {
    let text = if explain { p.diagnostics.summary_text() } else { p.diagnostics.brief_text() };
    for line in text.lines() {
        say!(err, "  {line}  [{}]", p.role);
    }
    if explain {
        for r in &p.diagnostics.records {
            let what = match (&r.check, &r.message) {
                (Some(c), Some(m)) => format!("failed {c}: {m}"),
                (Some(c), None) => format!("failed {c}"),
                _ => "fired".to_string(),
            };
            say!(err, "    {} {} {}: {what} ({})", p.role, r.rule, r.node, r.location);
        }
    }
}
