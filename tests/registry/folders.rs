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
            // A LoRA fixture's model_type is its base fixture's (lora.json `base_fixture`,
            // a registered fixture beside it).
            let config = if f.kind == super::Kind::Lora {
                match lora_base(&f.dir) {
                    Ok(base) if self.get(&base).is_some_and(|b| b.kind == super::Kind::Decoder) => self.dir.join(&base).join("config.json"),
                    Ok(base) => {
                        problems.push(format!("fixture `{}`: lora.json's base_fixture `{base}` is not a registered decoder fixture", f.name));
                        continue;
                    }
                    Err(e) => {
                        problems.push(format!("fixture `{}`: {e}", f.name));
                        continue;
                    }
                }
            } else {
                f.dir.join("config.json")
            };
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

/// The base fixture a LoRA fixture's `lora.json` names (`base_fixture`, a sibling folder
/// written `../NAME` or `NAME`).
pub(crate) fn lora_base(dir: &std::path::Path) -> Result<String, String> {
    let path = dir.join("lora.json");
    let v: serde_json::Value = std::fs::read(&path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", path.display())))?;
    let base = v.get("base_fixture").and_then(|b| b.as_str()).ok_or_else(|| format!("{}: no string `base_fixture`", path.display()))?;
    Ok(base.trim_start_matches("../").to_string())
}
