//! The manual pages of the Debian package (`make deb`): `hearth.1` and one
//! page a subcommand (`hearth-serve.1`, `hearth-run.1`, ...), rendered from
//! the CLI by clap_mangen, the way `clap_mangen::generate_to` names them.
//! They are kept in `packaging/debian/man/` so that building the package
//! needs no extra step, and a test keeps them equal to the CLI: regenerate
//! them with `HEARTH_BLESS=1 cargo test -p hearth man_pages`.

use std::path::PathBuf;

use clap::CommandFactory as _;

/// Each page's file name and text, `hearth.1` first.
fn pages() -> Vec<(String, Vec<u8>)> {
    let mut cli = crate::Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its page's name, `hearth-serve`.
    cli.build();
    let mut pages = Vec::new();
    for cmd in std::iter::once(cli.clone()).chain(cli.get_subcommands().cloned()) {
        if cmd.is_hide_set() {
            continue;
        }
        let man = clap_mangen::Man::new(cmd).manual("Hearth");
        let mut text = Vec::new();
        man.render(&mut text).expect("render a man page");
        pages.push((man.get_filename(), text));
    }
    pages
}

/// `packaging/debian/man/` in the repository.
fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/debian/man")
}

#[test]
fn man_pages_match_the_cli() {
    let bless = std::env::var_os("HEARTH_BLESS").is_some();
    let dir = dir();
    let mut stale = Vec::new();
    let pages = pages();
    for (name, text) in &pages {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_ref() == Some(text) {
            continue;
        }
        if bless {
            std::fs::create_dir_all(&dir).expect("make packaging/debian/man");
            std::fs::write(&path, text).expect("write a man page");
        } else {
            stale.push(format!("{name} differs from the CLI or is missing"));
        }
    }
    // A page of a subcommand that is gone.
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".1") && !pages.iter().any(|(page, _)| *page == name) {
            if bless {
                std::fs::remove_file(entry.path()).expect("remove a stale man page");
            } else {
                stale.push(format!("{name} is the page of no command"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "packaging/debian/man/: {}\nRegenerate with: HEARTH_BLESS=1 cargo test -p hearth man_pages",
        stale.join("\n")
    );
}

#[test]
fn there_is_a_page_for_each_subcommand() {
    let names: Vec<String> = pages().into_iter().map(|(name, _)| name).collect();
    for name in [
        "hearth.1",
        "hearth-serve.1",
        "hearth-run.1",
        "hearth-work.1",
        "hearth-queue.1",
        "hearth-status.1",
        "hearth-reload.1",
        "hearth-stop.1",
        "hearth-php-lib.1",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
}
