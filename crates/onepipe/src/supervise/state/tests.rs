//! The runtime directory is private, and `down` signals only the processes it recorded.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command};

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("onepipe-state-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

#[test]
fn the_runtime_directory_is_created_private_and_refused_otherwise() {
    let base = scratch("private");
    let dir = base.join("onepipe");
    private_dir(&dir, uid()).unwrap();
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o700);
    private_dir(&dir, uid()).unwrap();

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = private_dir(&dir, uid()).unwrap_err();
    assert!(err.contains("mode 755"), "{err}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let err = private_dir(&dir, uid().wrapping_add(1)).unwrap_err();
    assert!(err.contains("owner"), "{err}");

    let link = base.join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let err = private_dir(&link, uid()).unwrap_err();
    assert!(err.contains("non-directory"), "{err}");
    let file = base.join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(private_dir(&file, uid()).is_err());
    std::fs::remove_dir_all(&base).unwrap();

    let runtime = runtime_dir().unwrap();
    let meta = std::fs::symlink_metadata(&runtime).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (uid(), 0o700));
}

#[test]
fn a_process_is_recorded_with_its_start_time_and_executable() {
    let me = Recorded::of(std::process::id()).unwrap();
    assert_eq!(me.exe, std::env::current_exe().unwrap());
    assert!(me.start_ticks > 0);
    assert!(me.is_running());
    assert_eq!(Recorded::of(u32::MAX), None);
}

fn sleeper() -> (Child, Recorded) {
    let child = Command::new("sleep").arg("60").spawn().unwrap();
    let recorded = Recorded::of(child.id()).unwrap();
    (child, recorded)
}

/// A pid whose start time or executable differs from the record is another process (the pid
/// was reused): `down` leaves it alone. The process recorded is stopped.
#[test]
fn only_a_process_matching_its_record_is_signalled() {
    let (mut child, recorded) = sleeper();
    let other_start = Recorded {
        start_ticks: recorded.start_ticks + 1,
        ..recorded.clone()
    };
    let other_exe = Recorded {
        exe: PathBuf::from("/usr/bin/not-sleep"),
        ..recorded.clone()
    };
    let grace = std::time::Duration::from_millis(100);
    stop_recorded(&[other_start.clone(), other_exe.clone()], grace);
    assert!(!other_start.signal(nix::sys::signal::Signal::SIGKILL));
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "a process not recorded was signalled"
    );
    assert!(recorded.is_running());

    stop_recorded(std::slice::from_ref(&recorded), std::time::Duration::from_secs(5));
    let status = child.wait().unwrap();
    assert!(!status.success(), "stopped by a signal: {status}");
    assert!(!recorded.is_running());
}

#[test]
fn a_record_round_trips_and_a_damaged_one_names_nothing() {
    let base = scratch("record");
    let path = base.join("up.pids");
    assert_eq!(read_record(&path), vec![]);
    let me = Recorded::of(std::process::id()).unwrap();
    write_record(&path, std::slice::from_ref(&me)).unwrap();
    assert_eq!(read_record(&path), vec![me]);
    std::fs::write(&path, b"12345\n67890\n").unwrap();
    assert_eq!(read_record(&path), vec![], "a bare list of pids is not trusted");
    std::fs::remove_dir_all(&base).unwrap();
}
