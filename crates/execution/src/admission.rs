//! Admission to a bounded pool of L in-flight tasks (FAST CLOUD's threads): a FIFO request queue
//! of requests not yet admitted, a FIFO task queue of admitted requests' tasks waiting for a slot,
//! and the admission rule: *non-blocking* admits the head request when a slot is idle, *blocking*
//! only when as many slots are idle as it has tasks. A task that finishes, fails or is cancelled
//! frees its slot at once. Unbounded (the default) admits everything at once.
//!
//! The shell tells the pool of every task it submitted exactly once that it ended (its slot, or
//! its place in the task queue, is given up): the pool keeps counts, not a list of running tasks,
//! so its cost per task does not grow with the tasks in flight.
//!
//! Must not: read a clock, do I/O, or know what a task does; requests and tasks are the shell's
//! numbers.

use std::collections::VecDeque;

/// The admission rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionMode {
    /// Admit the head request when at least one slot is idle (work conserving).
    #[default]
    NonBlocking,
    /// Admit the head request only when as many slots are idle as it announced tasks.
    Blocking,
}

/// What the pool lets the shell do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// Request `request` may start (its plan runs; its tasks come back through
    /// [`Admission::submit`]).
    Request {
        /// The shell's request number.
        request: u64,
    },
    /// Task `task` of `request` has a slot: send it.
    Task {
        /// The shell's request number.
        request: u64,
        /// The task within the request.
        task: usize,
    },
}

/// The pool: L slots, the two queues and the rule.
#[derive(Clone, Debug)]
pub struct Admission {
    slots: Option<usize>,
    mode: AdmissionMode,
    busy: usize,
    /// Requests not yet admitted, with the tasks each announced.
    requests: VecDeque<(u64, usize)>,
    /// Admitted requests with the announced tasks they have not submitted yet: those tasks are as
    /// good as waiting, so the next request is admitted only past them (as if the shell had
    /// submitted them the instant their request was admitted).
    unsubmitted: VecDeque<(u64, usize)>,
    waiting_tasks: VecDeque<(u64, usize)>,
    ready: VecDeque<Admitted>,
}

/// How big the pool is and how it admits: what a configuration names (the gateway's
/// `[data.admission]` table is this struct).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmissionSettings {
    /// Task slots (`None`: unbounded, every request and task at once).
    pub slots: Option<usize>,
    /// The rule (it matters only with a bound): `"non_blocking"` (default, a request starts on one
    /// idle slot) or `"blocking"` (only when as many slots are idle as it starts tasks).
    pub mode: AdmissionMode,
}

impl AdmissionSettings {
    /// The pool these settings describe.
    pub fn pool(self) -> Admission {
        Admission::new(self.slots, self.mode)
    }
}

impl std::str::FromStr for AdmissionMode {
    type Err = String;

    fn from_str(text: &str) -> Result<AdmissionMode, String> {
        match text {
            "non_blocking" => Ok(AdmissionMode::NonBlocking),
            "blocking" => Ok(AdmissionMode::Blocking),
            other => Err(format!("admission is \"non_blocking\" or \"blocking\", not {other:?}")),
        }
    }
}

impl std::fmt::Display for AdmissionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AdmissionMode::NonBlocking => "non_blocking",
            AdmissionMode::Blocking => "blocking",
        })
    }
}

/// Most requests waiting for admission; beyond it [`Admission::arrive`] refuses.
pub const REQUEST_QUEUE_MAX: usize = 1 << 22;

impl Admission {
    /// A pool of `slots` task slots (`None`: unbounded) under `mode`.
    pub fn new(slots: Option<usize>, mode: AdmissionMode) -> Admission {
        assert!(slots != Some(0), "a pool needs at least one slot");
        Admission {
            slots,
            mode,
            busy: 0,
            requests: VecDeque::new(),
            unsubmitted: VecDeque::new(),
            waiting_tasks: VecDeque::new(),
            ready: VecDeque::new(),
        }
    }

    /// An unbounded pool: every request and task is admitted at once.
    pub fn unbounded() -> Admission {
        Admission::new(None, AdmissionMode::NonBlocking)
    }

    /// Request `request`, which will run `tasks` tasks at most at once, arrives. `false` when the
    /// request queue is full (the shell refuses the request).
    pub fn arrive(&mut self, request: u64, tasks: usize) -> bool {
        if self.requests.len() >= REQUEST_QUEUE_MAX {
            return false;
        }
        self.requests.push_back((request, tasks.max(1)));
        self.admit();
        true
    }

    /// Task `task` of admitted request `request` wants a slot.
    pub fn submit(&mut self, request: u64, task: usize) {
        if let Some(position) = self.unsubmitted.iter().position(|&(r, _)| r == request) {
            self.unsubmitted[position].1 -= 1;
            if self.unsubmitted[position].1 == 0 {
                self.unsubmitted.remove(position);
            }
        }
        self.waiting_tasks.push_back((request, task));
        self.admit();
    }

    /// Task `task` of `request`, submitted, finished, failed or was cancelled: its slot (if it
    /// had one) is free at once, and a waiting one leaves the queue. Called once per submitted
    /// task that [`Admission::request_ended`] has not already withdrawn.
    pub fn task_ended(&mut self, request: u64, task: usize) {
        if let Some(position) = self.waiting_tasks.iter().position(|&t| t == (request, task)) {
            self.waiting_tasks.remove(position);
        } else {
            assert!(self.busy > 0, "task {task} of request {request} ended twice, or was never submitted");
            self.busy -= 1;
        }
        self.admit();
    }

    /// Request `request`, not yet admitted, gives up (its client left): it leaves the request
    /// queue.
    pub fn withdraw(&mut self, request: u64) {
        self.requests.retain(|&(r, _)| r != request);
        self.admit();
    }

    /// Admitted `request` is over: its waiting tasks leave the task queue (its running ones end
    /// through [`Admission::task_ended`], once each).
    pub fn request_ended(&mut self, request: u64) {
        self.waiting_tasks.retain(|&(r, _)| r != request);
        self.unsubmitted.retain(|&(r, _)| r != request);
        self.admit();
    }

    /// The next request or task the shell may start.
    pub fn poll_admitted(&mut self) -> Option<Admitted> {
        self.ready.pop_front()
    }

    /// The bound on tasks in flight (`None`: unbounded).
    pub fn slots(&self) -> Option<usize> {
        self.slots
    }

    /// Tasks holding a slot.
    pub fn busy_slots(&self) -> usize {
        self.busy
    }

    /// Requests waiting for admission.
    pub fn waiting_requests(&self) -> usize {
        self.requests.len()
    }

    /// Tasks of admitted requests waiting for a slot (those announced and not yet submitted
    /// included).
    pub fn waiting_tasks(&self) -> usize {
        self.waiting_tasks.len() + self.unsubmitted_tasks()
    }

    fn unsubmitted_tasks(&self) -> usize {
        self.unsubmitted.iter().map(|&(_, tasks)| tasks).sum()
    }

    fn idle(&self) -> usize {
        self.slots.map_or(usize::MAX, |slots| slots - self.busy)
    }

    /// Gives idle slots to waiting tasks first (admitted requests go before new ones), then admits
    /// head requests while the rule allows.
    fn admit(&mut self) {
        loop {
            while self.idle() > 0
                && let Some((request, task)) = self.waiting_tasks.pop_front()
            {
                self.busy += 1;
                self.ready.push_back(Admitted::Task { request, task });
            }
            let Some(&(request, tasks)) = self.requests.front() else { return };
            let needed = match self.mode {
                AdmissionMode::NonBlocking => 1,
                AdmissionMode::Blocking => self.slots.map_or(tasks, |slots| tasks.min(slots)),
            };
            // Slots the admitted requests' unsubmitted tasks will take are not idle.
            let idle = self.idle().saturating_sub(self.unsubmitted_tasks());
            if idle < needed || !self.waiting_tasks.is_empty() {
                return;
            }
            self.requests.pop_front();
            self.ready.push_back(Admitted::Request { request });
            if self.slots.is_some() {
                self.unsubmitted.push_back((request, tasks));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(pool: &mut Admission) -> Vec<Admitted> {
        std::iter::from_fn(|| pool.poll_admitted()).collect()
    }

    #[test]
    fn an_unbounded_pool_admits_everything_at_once() {
        let mut pool = Admission::unbounded();
        assert!(pool.arrive(1, 9));
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 1 }]);
        for task in 0..9 {
            pool.submit(1, task);
        }
        assert_eq!(drain(&mut pool).len(), 9);
        assert_eq!(pool.busy_slots(), 9);
    }

    #[test]
    fn non_blocking_admits_on_one_idle_slot_and_queues_the_tasks() {
        let mut pool = Admission::new(Some(4), AdmissionMode::NonBlocking);
        pool.arrive(1, 3);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 1 }]);
        (0..3).for_each(|t| pool.submit(1, t));
        drain(&mut pool);
        pool.arrive(2, 3);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 2 }], "one slot idle");
        (0..3).for_each(|t| pool.submit(2, t));
        assert_eq!(drain(&mut pool), vec![Admitted::Task { request: 2, task: 0 }]);
        assert_eq!(pool.waiting_tasks(), 2);
        pool.arrive(3, 3);
        assert!(drain(&mut pool).is_empty(), "no idle slot: request 3 waits");
        pool.task_ended(1, 1);
        assert_eq!(drain(&mut pool), vec![Admitted::Task { request: 2, task: 1 }], "waiting tasks go first");
        pool.request_ended(2);
        pool.task_ended(1, 0);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 3 }], "request 2's waiting task left");
    }

    #[test]
    fn non_blocking_admits_the_next_request_only_past_the_tasks_of_the_last_one() {
        // Two slots free up at once while three requests wait: the first is admitted, and its three
        // announced tasks take both slots (and queue one) before they are even submitted, so the
        // other two stay in the request queue, where a backlog-driven policy counts them.
        let mut pool = Admission::new(Some(2), AdmissionMode::NonBlocking);
        pool.arrive(1, 2);
        drain(&mut pool);
        pool.submit(1, 0);
        pool.submit(1, 1);
        for request in 2..=4 {
            pool.arrive(request, 3);
        }
        assert_eq!(drain(&mut pool).len(), 2, "two tasks of request 1 started");
        pool.task_ended(1, 0);
        pool.task_ended(1, 1);
        pool.request_ended(1);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 2 }]);
        assert_eq!((pool.waiting_requests(), pool.waiting_tasks()), (2, 3));
        for task in 0..3 {
            pool.submit(2, task);
        }
        let started = drain(&mut pool);
        assert_eq!(started, vec![Admitted::Task { request: 2, task: 0 }, Admitted::Task { request: 2, task: 1 }]);
        assert_eq!((pool.waiting_requests(), pool.waiting_tasks()), (2, 1));
        // Request 2 is over (its waiting task leaves), then its running tasks end.
        pool.request_ended(2);
        pool.task_ended(2, 0);
        pool.task_ended(2, 1);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 3 }]);
        // A request over before it submitted what it announced releases the reservation.
        pool.request_ended(3);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 4 }]);
    }

    #[test]
    fn blocking_admits_only_when_every_task_has_a_slot() {
        let mut pool = Admission::new(Some(4), AdmissionMode::Blocking);
        pool.arrive(1, 3);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 1 }]);
        (0..3).for_each(|t| pool.submit(1, t));
        assert_eq!(drain(&mut pool).len(), 3);
        pool.arrive(2, 3);
        assert!(drain(&mut pool).is_empty(), "1 idle slot, 3 needed");
        pool.task_ended(1, 0);
        assert!(drain(&mut pool).is_empty(), "2 idle slots, 3 needed");
        pool.task_ended(1, 2);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 2 }]);
        (0..3).for_each(|t| pool.submit(2, t));
        assert_eq!(drain(&mut pool).len(), 3, "the slots it was admitted for");
    }

    #[test]
    fn a_cancelled_running_task_frees_its_slot_at_once() {
        let mut pool = Admission::new(Some(1), AdmissionMode::NonBlocking);
        pool.arrive(1, 2);
        drain(&mut pool);
        pool.submit(1, 0);
        pool.submit(1, 1);
        assert_eq!(drain(&mut pool), vec![Admitted::Task { request: 1, task: 0 }]);
        pool.task_ended(1, 0);
        assert_eq!(drain(&mut pool), vec![Admitted::Task { request: 1, task: 1 }]);
        pool.task_ended(1, 1);
        assert_eq!(pool.busy_slots(), 0);
    }

    #[test]
    #[should_panic(expected = "ended twice")]
    fn a_task_that_ends_twice_is_a_shell_bug() {
        let mut pool = Admission::new(Some(2), AdmissionMode::NonBlocking);
        pool.arrive(1, 1);
        pool.submit(1, 0);
        drain(&mut pool);
        pool.task_ended(1, 0);
        pool.task_ended(1, 0);
    }

    #[test]
    fn a_waiting_task_that_ends_leaves_the_queue_without_a_slot() {
        let mut pool = Admission::new(Some(1), AdmissionMode::NonBlocking);
        pool.arrive(1, 2);
        pool.submit(1, 0);
        pool.submit(1, 1);
        drain(&mut pool);
        pool.task_ended(1, 1);
        assert_eq!((pool.busy_slots(), pool.waiting_tasks()), (1, 0));
        pool.task_ended(1, 0);
        assert_eq!(pool.busy_slots(), 0);
    }

    #[test]
    fn settings_name_the_rule() {
        assert_eq!("blocking".parse(), Ok(AdmissionMode::Blocking));
        assert_eq!(AdmissionMode::NonBlocking.to_string().parse(), Ok(AdmissionMode::NonBlocking));
        assert!("fifo".parse::<AdmissionMode>().unwrap_err().contains("non_blocking"));
        assert_eq!(AdmissionSettings::default().pool().busy_slots(), 0);
    }

    #[test]
    fn a_request_that_gives_up_before_admission_leaves_the_queue() {
        let mut pool = Admission::new(Some(1), AdmissionMode::NonBlocking);
        pool.arrive(1, 1);
        pool.submit(1, 0);
        pool.arrive(2, 1);
        pool.arrive(3, 1);
        drain(&mut pool);
        pool.withdraw(2);
        assert_eq!(pool.waiting_requests(), 1);
        pool.task_ended(1, 0);
        assert_eq!(drain(&mut pool), vec![Admitted::Request { request: 3 }]);
    }
}
