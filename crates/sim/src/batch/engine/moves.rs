//! The mover in the batch engine: its period, the load reports it reads, and a move's two tasks
//! (read the unit at its source, write it at its destination, each queued FCFS with the clients'
//! reads), after which the placement switches. One move at a time; a tick that finds one running
//! starts none, so moves never start faster than the cap.
//!
//! Must not: choose the move (the policy's mover does) or skip the queues.

use super::{BatchEngine, Event, NodeTask, TaskKind, TaskState, View};
use model::{MoveRecord, NEVER, NodeId};

impl BatchEngine<'_> {
    pub(super) fn load_tick(&mut self) {
        let period_s = self.setup.load_period_ns as f64 / 1e9;
        let loads: Vec<f64> = self
            .node_bytes_served
            .iter()
            .zip(&self.node_bytes_at_tick)
            .map(|(&now, &before)| (now - before) as f64 / period_s)
            .collect();
        self.node_bytes_at_tick.clone_from(&self.node_bytes_served);
        if let Some(mover) = &mut self.mover {
            mover.observe_loads(&loads);
        }
        self.schedule(self.now_ns + self.setup.load_period_ns, Event::LoadTick);
    }

    pub(super) fn mover_tick(&mut self) {
        let Some(period) = self.mover.as_ref().map(|m| m.settings().period_ns()) else { return };
        self.schedule(self.now_ns + period, Event::MoverTick);
        if self.active_move.is_some() || self.now_ns >= self.setup.end_ns {
            return;
        }
        let mover = self.mover.as_ref().expect("checked above");
        let view = View::new(&self.placement, &self.layout, self.setup, &self.nodes, self.now_ns);
        let unit_bytes = |stripe: model::StripeId| self.setup.unit_bytes[stripe.index()];
        let sites = self.policy.site_costs();
        // The batch simulator's nodes have no racks.
        let racks = policy::ecstore::mover::RackRule::Free;
        let Some(proposal) = mover.propose(&view, sites, &unit_bytes, self.now_ns, racks, &mut self.mover_rng) else {
            return;
        };
        self.active_move = Some((proposal, self.now_ns));
        let task = self.move_task(TaskKind::MoveRead, proposal.from);
        self.schedule(self.now_ns + self.setup.network_latency_ns, Event::TaskArrive { task });
    }

    fn move_task(&mut self, kind: TaskKind, node: NodeId) -> u32 {
        let (proposal, _) = self.active_move.expect("a move is running");
        let task = self.new_task(node.0, u64::MAX);
        let t: &mut NodeTask = &mut self.tasks[task as usize];
        t.kind = kind;
        t.bytes = self.setup.unit_bytes[proposal.stripe.index()];
        task
    }

    /// A move task answered: after the read, the write; after the write, the placement switches.
    pub(super) fn move_step(&mut self, task: u32) {
        let (kind, state) = (self.tasks[task as usize].kind, self.tasks[task as usize].state);
        self.free_tasks.push(task);
        let (proposal, start_ns) = self.active_move.expect("a move task belongs to the running move");
        if state != TaskState::Done {
            self.finish_move(NEVER);
            return;
        }
        if kind == TaskKind::MoveRead {
            let write = self.move_task(TaskKind::MoveWrite, proposal.to);
            self.schedule(self.now_ns + self.setup.network_latency_ns, Event::TaskArrive { task: write });
            return;
        }
        let from = self
            .placement
            .move_unit(proposal.stripe, proposal.unit, proposal.to)
            .expect("the mover proposes a node holding no unit of the stripe");
        assert_eq!(from, proposal.from, "the unit moved from where it was");
        let nodes = self.placement.stripe_nodes(proposal.stripe);
        assert!(nodes.iter().enumerate().all(|(i, n)| !nodes[..i].contains(n)), "two units of a stripe on one node");
        debug_assert!(start_ns < self.now_ns);
        self.finish_move(self.now_ns);
    }

    fn finish_move(&mut self, end_ns: u64) {
        let (proposal, start_ns) = self.active_move.take().expect("a move is running");
        self.moves.push(MoveRecord {
            stripe: proposal.stripe,
            unit: proposal.unit,
            from: proposal.from,
            to: proposal.to,
            bytes: self.setup.unit_bytes[proposal.stripe.index()],
            start_ns,
            end_ns,
            gain: proposal.gain,
            access_gain: proposal.access_gain,
            balance_gain: proposal.balance_gain,
        });
    }
}
