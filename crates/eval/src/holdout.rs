//! The holdout's hashes (issue 19): before a holdout run, the SHA-256 of the binary, of every
//! file of the corpus and of the policy files is frozen; a report of the holdout is refused
//! when any of them changed since, naming each file that did.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Why hashes could not be taken or do not match.
#[derive(Debug, thiserror::Error)]
pub enum HoldoutError {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Read {
        /// What.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The frozen manifest is not one.
    #[error("{path}: not a holdout manifest: {message}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// What was frozen changed: the holdout is not reported.
    #[error("the holdout's files changed since they were frozen: {}", .changes.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Changed {
        /// Each change.
        changes: Vec<Change>,
    },
}

/// One file that is not as frozen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Its content changed.
    Modified {
        /// Its name in the manifest.
        name: String,
        /// Its frozen hash.
        frozen: String,
        /// Its hash now.
        now: String,
    },
    /// It is new.
    Added {
        /// Its name.
        name: String,
    },
    /// It is gone.
    Removed {
        /// Its name.
        name: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Modified { name, frozen, now } => {
                write!(f, "{name} changed (frozen {frozen}, now {now})")
            }
            Change::Added { name } => write!(f, "{name} was added"),
            Change::Removed { name } => write!(f, "{name} was removed"),
        }
    }
}

/// The hashes of what a holdout run depends on, by name: `binary`, `corpus/<relative path>`,
/// `policies/<relative path>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `sha256:<hex>` of each file, by name, sorted.
    pub files: BTreeMap<String, String>,
}

impl Manifest {
    /// Hashes `binary`, every file under `corpus` (`None`: the corpus compiled into the
    /// binary, which its hash covers) and every file under `policies` (a folder that does not
    /// exist adds nothing: the binary's built-in policies).
    pub fn compute(
        binary: &Path,
        corpus: Option<&Path>,
        policies: &Path,
    ) -> Result<Self, HoldoutError> {
        let mut files = BTreeMap::new();
        files.insert("binary".to_owned(), sha256_file(binary)?);
        for (prefix, dir) in [("corpus", corpus), ("policies", Some(policies))] {
            let Some(dir) = dir else {
                continue;
            };
            if prefix == "policies" && !dir.exists() {
                continue;
            }
            let mut found = Vec::new();
            walk(dir, dir, &mut found)?;
            for (relative, path) in found {
                files.insert(format!("{prefix}/{relative}"), sha256_file(&path)?);
            }
        }
        Ok(Self { files })
    }

    /// Every difference of `now` from this frozen manifest; an error naming them if any.
    pub fn check(&self, now: &Manifest) -> Result<(), HoldoutError> {
        let mut changes = Vec::new();
        for (name, frozen) in &self.files {
            match now.files.get(name) {
                None => changes.push(Change::Removed { name: name.clone() }),
                Some(hash) if hash != frozen => changes.push(Change::Modified {
                    name: name.clone(),
                    frozen: frozen.clone(),
                    now: hash.clone(),
                }),
                Some(_) => {}
            }
        }
        for name in now.files.keys() {
            if !self.files.contains_key(name) {
                changes.push(Change::Added { name: name.clone() });
            }
        }
        if changes.is_empty() {
            Ok(())
        } else {
            Err(HoldoutError::Changed { changes })
        }
    }

    /// Writes the manifest as JSON to `path`.
    pub fn freeze(&self, path: &Path) -> Result<(), HoldoutError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| HoldoutError::Manifest {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        std::fs::write(path, text).map_err(|source| HoldoutError::Read {
            path: path.to_owned(),
            source,
        })
    }

    /// Reads a manifest [`Manifest::freeze`] wrote.
    pub fn read(path: &Path) -> Result<Self, HoldoutError> {
        let text = std::fs::read_to_string(path).map_err(|source| HoldoutError::Read {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| HoldoutError::Manifest {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// One hash of the whole manifest, for the report.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for (name, hash) in &self.files {
            hasher.update(name.as_bytes());
            hasher.update(b"\0");
            hasher.update(hash.as_bytes());
            hasher.update(b"\n");
        }
        format!("sha256:{}", hex::encode(hasher.finalize()))
    }
}

/// Every file under `dir`, by its path relative to `root` (`/`-separated), sorted.
fn walk(root: &Path, dir: &Path, found: &mut Vec<(String, PathBuf)>) -> Result<(), HoldoutError> {
    let read = |source| HoldoutError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(root, &path, found)?;
        } else {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            found.push((relative, path));
        }
    }
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, HoldoutError> {
    let failed = |source| HoldoutError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).map_err(failed)?;
        if n == 0 {
            break;
        }
        hasher.update(buffer.get(..n).unwrap_or_default());
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}
