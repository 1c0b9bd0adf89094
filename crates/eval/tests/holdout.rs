//! The holdout's hashes (issue 19): frozen before a holdout run, checked before its report;
//! any changed, added or removed file of the binary, the corpus or the policies refuses it,
//! naming the file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use agentroom_eval::{Change, HoldoutError, Manifest};

fn setup(dir: &Path) {
    std::fs::create_dir_all(dir.join("corpus/nested")).unwrap();
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("binary"), b"\x7fELF...").unwrap();
    std::fs::write(dir.join("corpus/01-a.toml"), "a").unwrap();
    std::fs::write(dir.join("corpus/nested/02-b.toml"), "b").unwrap();
    std::fs::write(dir.join("policies/room.toml"), "[review]").unwrap();
}

fn manifest(dir: &Path) -> Manifest {
    Manifest::compute(
        &dir.join("binary"),
        Some(&dir.join("corpus")),
        &dir.join("policies"),
    )
    .unwrap()
}

#[test]
fn unchanged_files_pass_and_the_manifest_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let frozen = manifest(dir.path());
    assert_eq!(
        frozen.files.keys().collect::<Vec<_>>(),
        [
            "binary",
            "corpus/01-a.toml",
            "corpus/nested/02-b.toml",
            "policies/room.toml"
        ]
    );
    let path = dir.path().join("holdout.json");
    frozen.freeze(&path).unwrap();
    let read = Manifest::read(&path).unwrap();
    assert_eq!(read, frozen);
    read.check(&manifest(dir.path())).unwrap();
    assert_eq!(read.digest(), frozen.digest());
}

#[test]
fn a_changed_corpus_file_refuses_the_holdout_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let frozen = manifest(dir.path());
    std::fs::write(dir.path().join("corpus/nested/02-b.toml"), "b, tuned").unwrap();
    let error = frozen.check(&manifest(dir.path())).unwrap_err();
    let HoldoutError::Changed { changes } = &error else {
        panic!("{error}");
    };
    assert!(
        matches!(&changes[..], [Change::Modified { name, .. }] if name == "corpus/nested/02-b.toml")
    );
    assert!(
        error
            .to_string()
            .contains("corpus/nested/02-b.toml changed"),
        "{error}"
    );
}

#[test]
fn an_added_or_removed_file_or_a_new_binary_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let frozen = manifest(dir.path());
    std::fs::write(dir.path().join("corpus/03-c.toml"), "c").unwrap();
    std::fs::remove_file(dir.path().join("policies/room.toml")).unwrap();
    std::fs::write(dir.path().join("binary"), b"rebuilt").unwrap();
    let HoldoutError::Changed { changes } = frozen.check(&manifest(dir.path())).unwrap_err() else {
        panic!("not a change");
    };
    assert!(changes.contains(&Change::Added {
        name: "corpus/03-c.toml".into()
    }));
    assert!(changes.contains(&Change::Removed {
        name: "policies/room.toml".into()
    }));
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, Change::Modified { name, .. } if name == "binary"))
    );
}

#[test]
fn unreadable_paths_and_bad_manifests_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let error =
        Manifest::compute(&dir.path().join("nope"), Some(dir.path()), dir.path()).unwrap_err();
    assert!(matches!(error, HoldoutError::Read { .. }), "{error}");
    assert!(error.to_string().contains("nope"));
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\"files\": 3}").unwrap();
    assert!(matches!(
        Manifest::read(&path).unwrap_err(),
        HoldoutError::Manifest { .. }
    ));
}
