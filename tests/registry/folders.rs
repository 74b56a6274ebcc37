//! The registry against the folder it describes: every sub-folder listed, every listed fixture
//! present, and each one's `model_type` the one its config.json says.

use super::Registry;

impl Registry {
    /// Every disagreement between the registry and the folders beside it (empty when none).
    pub fn folder_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut folders = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    if entry.path().is_dir() {
                        folders.push(entry.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            Err(e) => problems.push(format!("{}: {e}", self.dir.display())),
        }
        folders.sort();
        for folder in &folders {
            if self.get(folder).is_none() {
                problems.push(format!("folder `{folder}` has no entry in the registry"));
            }
        }
        for f in &self.fixtures {
            if !folders.contains(&f.name) {
                problems.push(format!("fixture `{}` has no folder in {}", f.name, self.dir.display()));
                continue;
            }
            let config = f.dir.join("config.json");
            let model_type = std::fs::read(&config)
                .map_err(|e| e.to_string())
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|e| e.to_string()))
                .map(|v| v.get("model_type").and_then(|m| m.as_str()).map(str::to_string));
            match model_type {
                Ok(Some(t)) if t == f.model_type => {}
                Ok(Some(t)) => problems.push(format!("fixture `{}`: the registry says model_type `{}`, config.json says `{t}`", f.name, f.model_type)),
                Ok(None) => problems.push(format!("fixture `{}`: config.json has no string `model_type`", f.name)),
                Err(e) => problems.push(format!("fixture `{}`: {}: {e}", f.name, config.display())),
            }
        }
        problems
    }
}
