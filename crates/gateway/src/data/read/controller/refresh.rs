//! The controller's refresh work, off the request path: the lazy policies' periodic tables (every
//! node probed, then the policy's own refresh, Opt-Lazy's solve run without the controller's
//! lock and installed only if the policy was not switched meanwhile), and the class shares a
//! policy solved, published to the nodes. Must not block a read.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use meta::NodeId as StoreNodeId;
use model::NodeId as PolicyNodeId;
use policy::ReadPolicy;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Controller;
use super::catalog::{LiveView, record_rates};
use super::counters::count;
use crate::data::DataError;
use crate::data::cluster::class_shares::SharesPublisher;
use crate::data::io::stripe_io::{NodeMap, StripeIo};
use policy::fec::FrontendState;

/// How often the refresh task wakes when the policy is not lazy (to notice a switch to one).
pub(super) const IDLE_REFRESH_CHECK: Duration = Duration::from_millis(500);

/// The least time published class shares hold (a longer refresh period holds them longer).
pub const SHARES_VALID_MIN: Duration = Duration::from_secs(30);

impl Controller {
    /// The lazy policies' refresh loop: every period of the running policy, probe every node and
    /// refresh (Opt-Lazy solves here, never on a request, and without holding the controller). Ends when `stop` changes.
    /// After each refresh (and each wake of a policy without one) the policy's class shares are
    /// published through `shares` (membership tells the nodes the published ones).
    pub async fn run_refresh(
        self: Arc<Self>,
        io: Arc<StripeIo>,
        shares: Option<Arc<SharesPublisher>>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        // Whether what a lazy policy solved (shares, new-stripe racks) is withdrawn since it ran.
        let mut withdrawn = true;
        loop {
            let period = self.lock().refresh_period_ns();
            if let Some(period_ns) = period {
                // Refreshes start every T, however long the probes and the solve take (one that
                // takes longer than T is followed by the next at once, never by a backlog).
                let next = tokio::time::Instant::now() + Duration::from_nanos(period_ns);
                if let Err(error) = self.refresh_once(&io).await {
                    tracing::warn!(%error, "lazy policy refresh failed; keeping the old tables");
                }
                self.publish_class_shares(&io, shares.as_deref()).await;
                withdrawn = false;
                tokio::select! {
                    _ = stop.changed() => return,
                    () = self.switched.notified() => {}
                    () = tokio::time::sleep_until(next) => {}
                }
            } else {
                if !withdrawn {
                    // Switched away from a policy that solved shares or placed: the configured
                    // shares and the balancing placer again (retried until the withdrawal lands).
                    self.install_placement(&io);
                    withdrawn = self.publish_class_shares(&io, shares.as_deref()).await;
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    () = self.switched.notified() => {}
                    () = tokio::time::sleep(IDLE_REFRESH_CHECK) => {}
                }
            }
        }
    }

    /// Publishes the policy's class shares, to hold for three refresh periods (at least
    /// [`SHARES_VALID_MIN`]): a gateway that stops refreshing stops holding the nodes to them.
    /// Whether the metadata store took what there was to publish (or there was no publisher).
    pub(super) async fn publish_class_shares(&self, io: &StripeIo, publisher: Option<&SharesPublisher>) -> bool {
        let Some(publisher) = publisher else { return true };
        let period_ns = self.lock().policy.refresh_period_ns().unwrap_or(0);
        let valid = (Duration::from_nanos(period_ns) * 3).max(SHARES_VALID_MIN);
        let valid_ms = u64::try_from(valid.as_millis()).unwrap_or(u64::MAX);
        let shares = self.node_class_shares();
        let meta = io.cluster().meta().as_ref();
        match publisher.publish(meta, shares, crate::data::cluster::membership::unix_now_ms(), valid_ms).await {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!(%error, "could not publish the solved class shares; the nodes keep what they run");
                false
            }
        }
    }

    /// One refresh: probes every registered node in parallel, then the policy's refresh: its
    /// first half under the controller's lock, its work (Opt-Lazy's solve) on a blocking thread
    /// without it, and the result installed under the lock again, unless the policy was
    /// switched meanwhile.
    /// The placer then takes the policy's new-stripe racks.
    pub async fn refresh_once(&self, io: &StripeIo) -> Result<(), DataError> {
        let refreshed = self.refresh_policy(io).await;
        self.install_placement(io);
        refreshed
    }

    /// Refreshes every planner whose refresh is due (the default's and the bucket profiles'),
    /// over one probe round when any of them reads queues.
    pub(super) async fn refresh_policy(&self, io: &StripeIo) -> Result<(), DataError> {
        let (due, probes, racks, generation) = {
            let mut state = self.lock();
            let due = state.due_for_refresh(self.now_ns());
            let mut asks = |ask: fn(&dyn ReadPolicy) -> bool| {
                due.iter().any(|name| state.planner_named(name.as_deref()).is_some_and(|p| ask(&*p)))
            };
            let (probes, racks) = (asks(|p| p.refresh_probes_nodes()), asks(|p| p.refresh_reads_racks()));
            (due, probes, racks, state.generation)
        };
        if racks {
            // A solve per rack (JLWO's) needs each node's rack (reads do not): the node records once.
            let nodes = io.cluster().node_map().await?;
            self.lock().catalog.note_racks(&nodes);
        }
        // FAST CLOUD's refit and JLWO's solve ask the nodes nothing.
        let replies = if probes {
            let (_, replies, sent) = self.probe_every_node(io).await?;
            count(&self.counters.refresh_probes, "lowtail_controller_refresh_probes_total", sent as u64);
            self.counters.refresh_probes_untaken.fetch_add(sent as u64, Ordering::Relaxed);
            replies
        } else {
            Vec::new()
        };
        for name in &due {
            self.refresh_planner(name.as_deref(), generation, &replies).await?;
        }
        Ok(())
    }

    /// Probes every node of the cluster in parallel (registering new ones in the catalog): the
    /// node map read, the replies and how many probes were sent.
    pub(super) async fn probe_every_node(
        &self,
        io: &StripeIo,
    ) -> Result<(NodeMap, Vec<(PolicyNodeId, Option<node::ProbeReply>)>, usize), DataError> {
        let nodes = io.cluster().node_map().await?;
        let mut ids: Vec<StoreNodeId> = nodes.keys().copied().collect();
        ids.sort();
        let targets: Vec<(PolicyNodeId, StoreNodeId)> = {
            let mut state = self.lock();
            ids.iter().map(|&id| (state.catalog.node(id), id)).collect()
        };
        let (replies, sent) = self.probe_nodes(io, &nodes, &targets).await;
        Ok((nodes, replies, sent))
    }

    /// The refresh of the planner of profile `name` (`None`: the default's) over probe `replies`
    /// taken while `generation` was running.
    pub(super) async fn refresh_planner(
        &self,
        name: Option<&str>,
        generation: u64,
        replies: &[(PolicyNodeId, Option<node::ProbeReply>)],
    ) -> Result<(), DataError> {
        let started = Instant::now();
        let work = {
            let mut state = self.lock();
            if state.generation != generation {
                return Ok(());
            }
            let state = &mut *state;
            let answers = record_rates(&mut state.catalog, replies);
            // A refresh plans no request, so the pool's state is not asked for.
            let frontend = FrontendState::unbounded();
            let mut view = LiveView {
                catalog: &state.catalog,
                answers: &answers,
                frontend_count: self.frontend_count,
                unanswered: 0,
                frontend,
                down: Vec::new(),
            };
            let mut rng = ChaCha8Rng::seed_from_u64(state.rng.next_u64());
            let now_ns = self.now_ns();
            match name {
                None => state.policy.begin_refresh(&mut view, now_ns, &mut rng),
                Some(name) => match state.profiles.get_mut(name) {
                    Some(planner) => planner.policy.begin_refresh(&mut view, now_ns, &mut rng),
                    None => return Ok(()),
                },
            }
        };
        let mut locked = started.elapsed();
        if let Some(work) = work {
            // Opt-Lazy's solve: on a blocking thread and outside the lock, so reads go on being
            // planned (with the previous table) while it runs.
            let result = tokio::task::spawn_blocking(move || work.run())
                .await
                .map_err(|error| DataError::Internal(format!("the lazy policy's refresh work failed: {error}")))?;
            let installing = Instant::now();
            let mut state = self.lock();
            // A policy switched meanwhile did not hand out this work.
            if state.generation == generation
                && let Some(planner) = state.planner_named(name)
            {
                planner.finish_refresh(result);
                if let Some(why) = planner.refresh_failure() {
                    tracing::warn!(%why, profile = ?name, "the policy's refresh installed nothing; keeping the old tables");
                }
            }
            locked += installing.elapsed();
        }
        if name.is_none() {
            for (name, value) in self.lock().policy.gauges() {
                metrics::gauge!("lowtail_controller_policy_state", "name" => name).set(value);
            }
        }
        metrics::histogram!("lowtail_controller_refresh_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("lowtail_controller_refresh_locked_seconds").record(locked.as_secs_f64());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::read::controller::ControllerConfig;
    use policy::{PolicyKind, PolicySettings, ReadPolicy};
    use std::sync::atomic::AtomicU64;

    /// A lazy policy whose refresh work waits until the test lets it finish.
    struct GatedRefresh {
        started: std::sync::mpsc::Sender<()>,
        release: Option<std::sync::mpsc::Receiver<u32>>,
        installed: Arc<AtomicU64>,
    }

    impl ReadPolicy for GatedRefresh {
        fn name(&self) -> &'static str {
            "gated-refresh"
        }

        fn plan(
            &mut self,
            _view: &mut dyn policy::ClusterView,
            _now_ns: u64,
            _request: &model::ReadRequest,
            _rng: &mut dyn RngCore,
        ) -> model::ReadPlan {
            unreachable!("these tests only refresh")
        }

        fn refresh_period_ns(&self) -> Option<u64> {
            Some(1_000_000)
        }

        fn begin_refresh(
            &mut self,
            _view: &mut dyn policy::ClusterView,
            _now_ns: u64,
            _rng: &mut dyn RngCore,
        ) -> Option<policy::RefreshWork> {
            let started = self.started.clone();
            let release = self.release.take().expect("one refresh per test");
            Some(policy::RefreshWork::new(move || {
                started.send(()).unwrap();
                release.recv_timeout(Duration::from_secs(30)).expect("the test releases the work")
            }))
        }

        fn finish_refresh(&mut self, result: policy::RefreshResult) {
            let value: u32 = result.downcast().expect("a u32 from this policy's work");
            self.installed.store(u64::from(value), Ordering::SeqCst);
        }
    }

    /// A controller whose policy is a [`GatedRefresh`], with a refresh of it under way:
    /// (controller, the refresh, its release, the value it installed).
    async fn gated_refresh_under_way()
    -> (Arc<Controller>, tokio::task::JoinHandle<Result<(), DataError>>, std::sync::mpsc::Sender<u32>, Arc<AtomicU64>)
    {
        let controller = Arc::new(Controller::new(&ControllerConfig::default(), "rs-6-3").unwrap());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let installed = Arc::new(AtomicU64::new(0));
        let generation = {
            let mut state = controller.lock();
            state.policy =
                Box::new(GatedRefresh { started: started_tx, release: Some(release_rx), installed: installed.clone() });
            state.generation
        };
        let refreshing = tokio::spawn({
            let controller = controller.clone();
            async move { controller.refresh_planner(None, generation, &[]).await }
        });
        tokio::task::spawn_blocking(move || started_rx.recv_timeout(Duration::from_secs(30)))
            .await
            .unwrap()
            .expect("the refresh work starts");
        (controller, refreshing, release_tx, installed)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refresh_work_runs_without_the_controller_lock_and_is_installed_after() {
        let (controller, refreshing, release, installed) = gated_refresh_under_way().await;
        // The work is running, and requests could take the lock and plan meanwhile.
        assert!(controller.state.try_lock().is_ok(), "the refresh work holds the controller lock");
        assert_eq!(installed.load(Ordering::SeqCst), 0, "nothing installed before the work ends");
        release.send(42).unwrap();
        refreshing.await.unwrap().unwrap();
        assert_eq!(installed.load(Ordering::SeqCst), 42, "the work's result is installed");
    }

    /// A bucket profile's planner with a period of its own (LMLF-Lazy's 1 s) is refreshed when due,
    /// beside a default that refreshes nothing, and the loop wakes at its period.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bucket_profiles_planner_is_refreshed_on_its_own_period() {
        use crate::profiles::ActiveProfile;
        use policy::Profile;
        use policy::profile::Selection;
        let controller = Arc::new(Controller::new(&ControllerConfig::default(), "rs-6-3").unwrap());
        let lazy = ActiveProfile {
            name: "lazy".into(),
            profile: Profile { selection: Selection::LmlfLazy, ..Profile::default() },
            refusal: None,
        };
        let period_ns = 1_000_000_000;
        let generation = {
            let mut state = controller.lock();
            assert_eq!(state.refresh_period_ns(), None, "the default (hedged) refreshes nothing");
            assert!(state.ensure_planner(Some(&lazy), controller.admission).unwrap(), "built on first use");
            assert!(!state.ensure_planner(Some(&lazy), controller.admission).unwrap(), "and kept");
            assert_eq!(state.refresh_period_ns(), Some(period_ns));
            assert_eq!(state.due_for_refresh(5), vec![Some("lazy".to_string())]);
            assert!(state.due_for_refresh(period_ns / 2).is_empty(), "not again before its period");
            assert_eq!(state.due_for_refresh(5 + period_ns), vec![Some("lazy".to_string())]);
            state.generation
        };
        controller.refresh_planner(Some("lazy"), generation, &[]).await.unwrap();
        controller.refresh_planner(Some("gone"), generation, &[]).await.unwrap();
        // A changed profile is rebuilt, and the old planner's decisions are from another generation.
        let changed = ActiveProfile { profile: Profile { selection: Selection::Lmlf, ..lazy.profile.clone() }, ..lazy };
        let mut state = controller.lock();
        assert!(state.ensure_planner(Some(&changed), controller.admission).unwrap());
        assert!(state.generation > generation);
        assert_eq!(state.refresh_period_ns(), None, "LMLF refreshes nothing");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refresh_work_of_a_switched_policy_is_dropped() {
        let (controller, refreshing, release, installed) = gated_refresh_under_way().await;
        controller.set_policy(PolicyKind::LmlfLazy, PolicySettings::default()).unwrap();
        release.send(42).unwrap();
        refreshing.await.unwrap().unwrap();
        assert_eq!(installed.load(Ordering::SeqCst), 0, "a result for the old policy is not installed");
        assert_eq!(controller.policy().policy, PolicyKind::LmlfLazy);
    }
}
