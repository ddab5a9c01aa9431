//! The embedded backend: the conformance suite, reopening, and crash safety (a writer process killed
//! mid-stream loses nothing it acknowledged).

#[path = "common/conformance.rs"]
mod conformance;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meta::{ListObjectsQuery, MetaStore, NodeId, RedbStore, StripeId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite() {
    for (name, case) in conformance::CASES {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn MetaStore> = Arc::new(RedbStore::open(dir.path()).unwrap());
        println!("redb conformance: {name}");
        case(store).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let stripe_id;
    {
        let store = RedbStore::open(dir.path()).unwrap();
        assert!(store.path().ends_with(meta::DATABASE_FILE_NAME));
        store.create_bucket(conformance::bucket("kept")).await.unwrap();
        store.put_object("kept", "k", conformance::object(3, 1)).await.unwrap();
        stripe_id = store.allocate_stripe_id().await.unwrap();
        store.create_stripe(conformance::stripe(stripe_id, [1, 2, 3, 4, 5, 6, 7, 8, 9])).await.unwrap();
        store.put_config("policy", "normal").await.unwrap();
    }
    let store = RedbStore::open(dir.path()).unwrap();
    assert_eq!(store.get_object("kept", "k").await.unwrap(), conformance::object(3, 1));
    assert_eq!(store.get_stripe(stripe_id).await.unwrap().version, 1);
    assert_eq!(store.stripes_on_node(NodeId(5), None, 10).await.unwrap(), [stripe_id]);
    assert_eq!(store.get_config("policy").await.unwrap().as_deref(), Some("normal"));
    // Counters survive too: no id is handed out twice across restarts.
    assert!(store.allocate_stripe_id().await.unwrap() > stripe_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_reserved_in_blocks_increase_across_blocks_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut last = StripeId(0);
    for _ in 0..3 {
        let store = RedbStore::open(dir.path()).unwrap();
        // More than a reserved block (256) per open, so refills happen within a run and a restart
        // lands mid-block.
        for _ in 0..300 {
            let id = store.allocate_stripe_id().await.unwrap();
            assert!(id > last, "{id:?} after {last:?}");
            last = id;
        }
    }
}

/// Environment variable that turns `crash_writer` into the child process of `crash_loses_nothing_acknowledged`.
const CRASH_DIR_VAR: &str = "LOWTAIL_META_CRASH_DIR";

/// The child: writes objects as fast as it can, printing `ACK <i>` after each acknowledged put, until it
/// is killed. Does nothing when run as an ordinary test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_writer() {
    let Ok(dir) = std::env::var(CRASH_DIR_VAR) else { return };
    let store = RedbStore::open(&dir).unwrap();
    store.create_bucket(conformance::bucket("crash")).await.unwrap();
    let mut stdout = std::io::stdout();
    // Bounded: the parent kills the child long before this ends.
    for i in 0..100_000u64 {
        store.put_object("crash", &format!("key-{i:06}"), conformance::object(i, i)).await.unwrap();
        store.allocate_stripe_id().await.unwrap();
        writeln!(stdout, "ACK {i}").unwrap();
        stdout.flush().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_writer", "--nocapture", "--test-threads=1"])
        .env(CRASH_DIR_VAR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acknowledged = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    // Kill the writer (SIGKILL: no destructors, no clean shutdown) after 40 acknowledged writes.
    while Instant::now() < deadline {
        let Some(line) = lines.next() else { break };
        if let Some(number) = line.unwrap().strip_prefix("ACK ") {
            let number: u64 = number.parse().unwrap();
            acknowledged = Some(number);
            if number >= 40 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let last = acknowledged.expect("the writer acknowledged nothing");
    assert!(last >= 40, "the writer was too slow: {last} writes in 20 s");

    let store = RedbStore::open(dir.path()).unwrap();
    for i in 0..=last {
        assert_eq!(store.get_object("crash", &format!("key-{i:06}")).await.unwrap(), conformance::object(i, i));
    }
    let listed = store.list_objects("crash", &ListObjectsQuery::default()).await.unwrap();
    assert!(listed.objects.len() as u64 > last);
    // Each acknowledged write also allocated a stripe id; none is handed out again.
    assert!(store.allocate_stripe_id().await.unwrap() > StripeId(last + 1));
}

/// Callers on a current-thread runtime (tokio's test default) work too: redb transactions run on the
/// blocking pool and never need the runtime's drivers.
#[tokio::test]
async fn works_on_a_current_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.create_bucket(conformance::bucket("single")).await.unwrap();
    store.put_object("single", "k", conformance::object(1, 1)).await.unwrap();
    assert_eq!(store.list_objects("single", &ListObjectsQuery::default()).await.unwrap().key_count(), 1);
}
