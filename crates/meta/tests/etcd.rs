//! The etcd backend against a real etcd: the conformance suite, and two stores ("gateways") racing on the
//! same keys. Each test starts its own etcd (see `common/etcd_server.rs`); without the binary the tests
//! fail with install instructions unless `LOWTAIL_SKIP_ETCD=1`.

#[path = "common/conformance.rs"]
mod conformance;
#[path = "common/etcd_server.rs"]
mod etcd_server;

use std::collections::BTreeSet;
use std::sync::Arc;

use etcd_server::EtcdServer;
use meta::{EtcdStore, MetaError, MetaStore, NodeId, NodeState};

async fn store(server: &EtcdServer, prefix: &str) -> EtcdStore {
    EtcdStore::connect(std::slice::from_ref(&server.endpoint), prefix).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite() {
    let Some(server) = EtcdServer::start("conformance_suite") else { return };
    for (name, case) in conformance::CASES {
        // One prefix per case: the cases share the server but not their keys.
        let store: Arc<dyn MetaStore> = Arc::new(store(&server, &format!("/lowtail/conformance-{name}")).await);
        println!("etcd conformance: {name}");
        case(store).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_race() {
    let Some(server) = EtcdServer::start("two_gateways_race") else { return };
    let first: Arc<dyn MetaStore> = Arc::new(store(&server, "/lowtail/race").await);
    let second: Arc<dyn MetaStore> = Arc::new(store(&server, "/lowtail/race/").await);

    // Stripe ids allocated from both gateways at once are all distinct.
    let tasks: Vec<_> = (0..80)
        .map(|i| {
            let store = Arc::clone(if i % 2 == 0 { &first } else { &second });
            tokio::spawn(async move { store.allocate_stripe_id().await.unwrap() })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for task in tasks {
        assert!(ids.insert(task.await.unwrap()), "duplicate stripe id across gateways");
    }

    // Both gateways create the same bucket: exactly one wins each time.
    for round in 0..10 {
        let name = format!("race-{round}");
        let (a, b) = (Arc::clone(&first), Arc::clone(&second));
        let (name_a, name_b) = (name.clone(), name.clone());
        let task_a = tokio::spawn(async move { a.create_bucket(conformance::bucket(&name_a)).await });
        let task_b = tokio::spawn(async move { b.create_bucket(conformance::bucket(&name_b)).await });
        let outcomes = [task_a.await.unwrap(), task_b.await.unwrap()];
        assert_eq!(outcomes.iter().filter(|outcome| outcome.is_ok()).count(), 1, "{outcomes:?}");
        assert!(outcomes.contains(&Err(MetaError::BucketAlreadyExists(name.clone()))), "{outcomes:?}");
    }
    assert_eq!(second.list_buckets().await.unwrap().len(), 10);

    // Both gateways claim the same free lease at once, ten times: exactly one holds it each time, and
    // both are told who.
    for round in 0..10 {
        let name = format!("lease-{round}");
        let claims: Vec<_> = [(&first, "gateway-a"), (&second, "gateway-b")]
            .into_iter()
            .map(|(store, holder)| {
                let (store, name) = (Arc::clone(store), name.clone());
                tokio::spawn(async move { store.claim_lease(&name, holder, 1000, 500).await.unwrap() })
            })
            .collect();
        let mut told = Vec::new();
        for claim in claims {
            told.push(claim.await.unwrap());
        }
        assert_eq!(told[0], told[1], "both see the one holder");
    }

    // Both gateways move a unit of the same stripe from the same version: one wins, one gets Conflict.
    let id = first.allocate_stripe_id().await.unwrap();
    let created = first.create_stripe(conformance::stripe(id, [1, 2, 3, 4, 5, 6, 7, 8, 9])).await.unwrap();
    let updates: Vec<_> = [(&first, 20u32), (&second, 21)]
        .into_iter()
        .map(|(store, node)| {
            let (store, mut next) = (Arc::clone(store), created.clone());
            next.placement[0] = NodeId(node);
            tokio::spawn(async move { store.update_stripe(id, created.version, next).await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in updates {
        match task.await.unwrap() {
            Ok(stripe) => winners.push(stripe.placement[0]),
            Err(MetaError::Conflict(_)) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    // The node index agrees with the winner.
    assert_eq!(second.stripes_on_node(winners[0], None, 10).await.unwrap(), [id]);
    assert!(first.stripes_on_node(NodeId(1), None, 10).await.unwrap().is_empty());

    // Read-modify-writes from both gateways on one node record all land (heartbeats and a state change).
    first
        .register_node(meta::NodeInfo {
            id: NodeId(1),
            address: "127.0.0.1:7001".into(),
            rack: "r".into(),
            capacity_bytes: 1,
            state: NodeState::Up,
            last_heartbeat_ms: 0,
            down_since_ms: None,
            directory: None,
            checking_since_ms: None,
        })
        .await
        .unwrap();
    let mut beats: Vec<_> = (1..=20u64)
        .map(|i| {
            let store = Arc::clone(if i % 2 == 0 { &first } else { &second });
            tokio::spawn(async move { store.heartbeat(NodeId(1), i).await.map(|_| ()) })
        })
        .collect();
    let drain = Arc::clone(&second);
    beats.push(tokio::spawn(async move { drain.set_node_state(NodeId(1), NodeState::Draining, 0).await.map(|_| ()) }));
    for beat in beats {
        beat.await.unwrap().unwrap();
    }
    let node = first.get_node(NodeId(1)).await.unwrap();
    assert_eq!((node.state, node.last_heartbeat_ms), (NodeState::Draining, 20));

    // A put from one gateway racing a bucket delete from the other: never both succeed.
    for round in 0..10 {
        first.create_bucket(conformance::bucket("deleting")).await.unwrap();
        let (putter, deleter) = (Arc::clone(&first), Arc::clone(&second));
        let put = tokio::spawn(async move { putter.put_object("deleting", "k", conformance::object(1, 1)).await });
        let delete = tokio::spawn(async move { deleter.delete_bucket("deleting").await });
        match (put.await.unwrap(), delete.await.unwrap()) {
            (Ok(_), Err(MetaError::BucketNotEmpty(_))) => {
                second.delete_object("deleting", "k").await.unwrap();
                first.delete_bucket("deleting").await.unwrap();
            }
            (Err(MetaError::NoSuchBucket(_)), Ok(())) => {}
            other => panic!("round {round}: impossible outcome {other:?}"),
        }
    }

    // A prefix isolates clusters: another prefix sees none of this.
    let other = store(&server, "/lowtail/other-cluster").await;
    assert!(other.list_buckets().await.unwrap().is_empty());
    assert!(other.list_nodes().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_etcd_is_a_backend_error() {
    // Nothing listens on a port we just freed; the client fails instead of hanging.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    match EtcdStore::connect(&[endpoint], "/lowtail/x").await {
        Err(MetaError::Backend(_)) => {}
        Ok(store) => assert!(matches!(store.list_buckets().await, Err(MetaError::Backend(_)))),
        Err(other) => panic!("unexpected {other:?}"),
    }
    assert!(matches!(EtcdStore::connect(&[], "/p").await, Err(MetaError::InvalidArgument(_))));
}

/// The etcd semantics the backend's guards rely on: a range compare on `mod_revision < snapshot + 1` fails
/// once a key in the range is created or changed and holds on an empty range; `version == 0` holds exactly
/// while a key is absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_guards_behave_as_the_backend_assumes() {
    use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
    let Some(server) = EtcdServer::start("etcd_guards_behave_as_the_backend_assumes") else { return };
    let mut client = Client::connect([server.endpoint.as_str()], None).await.unwrap();
    let put = client.put("g/a", "1", None).await.unwrap();
    let snapshot = put.header().unwrap().revision();
    let range_unchanged = || Compare::mod_revision("g/", CompareOp::Less, snapshot + 1).with_range("g0");
    let marker = || vec![TxnOp::put("marker", "", None)];

    let txn = Txn::new().when(vec![range_unchanged()]).and_then(marker());
    assert!(client.txn(txn).await.unwrap().succeeded(), "an unchanged range passes");
    client.put("g/b", "new", None).await.unwrap();
    let txn = Txn::new().when(vec![range_unchanged()]).and_then(marker());
    assert!(!client.txn(txn).await.unwrap().succeeded(), "an insert into the range fails the guard");
    let empty = Compare::mod_revision("h/", CompareOp::Less, snapshot + 1).with_range("h0");
    assert!(client.txn(Txn::new().when(vec![empty]).and_then(marker())).await.unwrap().succeeded());

    let absent = || Compare::version("g/c", CompareOp::Equal, 0);
    assert!(client.txn(Txn::new().when(vec![absent()]).and_then(marker())).await.unwrap().succeeded());
    client.put("g/c", "x", None).await.unwrap();
    assert!(!client.txn(Txn::new().when(vec![absent()]).and_then(marker())).await.unwrap().succeeded());
}

/// Runs this test binary's `conformance_suite` alone in a child process with `env` set.
fn run_suite_with(env: &[(&str, &str)]) -> (bool, String) {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", "conformance_suite", "--nocapture"]);
    command.env_remove(etcd_server::SKIP_VAR);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

#[test]
fn missing_etcd_fails_loudly_unless_skipped() {
    // The override names the only place the harness looks when it is set.
    let (succeeded, output) = run_suite_with(&[(etcd_server::BINARY_VAR, "/nonexistent/etcd")]);
    assert!(!succeeded, "a missing etcd must fail the tests:\n{output}");
    assert!(output.contains("apt-get install -y etcd-server"), "{output}");
    let (succeeded, output) = run_suite_with(&[(etcd_server::SKIP_VAR, "1")]);
    assert!(succeeded, "{output}");
    assert!(output.contains("skipped because LOWTAIL_SKIP_ETCD=1"), "{output}");
}
