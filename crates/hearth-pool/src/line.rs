//! The idle workers and the requests waiting for one.
//!
//! A data structure and nothing else: no I/O, no timers, no pool state.
//! Who takes what, and when, is decided by `dispatch` (a request's side)
//! and `recycle` (a worker's side), each under the one lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::worker::{Handover, Worker, WorkerShared};

/// The line behind its lock, with the number of waiters readable without
/// it: queue offers are skipped when nobody waits (always, on a server
/// that is not saturated), and status reports read it.
#[derive(Debug, Default)]
pub(crate) struct WaitingLine {
    line: Mutex<Line>,
    waiting: AtomicUsize,
}

impl WaitingLine {
    /// Locks the line. The count of waiters is updated when the guard is
    /// dropped, while the lock is still held.
    pub fn lock(&self) -> LineGuard<'_> {
        LineGuard {
            line: self.line.lock().unwrap_or_else(|e| e.into_inner()),
            waiting: &self.waiting,
        }
    }

    /// Requests waiting in line now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// See [`WaitingLine::lock`].
#[derive(Debug)]
pub(crate) struct LineGuard<'a> {
    line: MutexGuard<'a, Line>,
    waiting: &'a AtomicUsize,
}

impl std::ops::Deref for LineGuard<'_> {
    type Target = Line;
    fn deref(&self) -> &Line {
        &self.line
    }
}

impl std::ops::DerefMut for LineGuard<'_> {
    fn deref_mut(&mut self) -> &mut Line {
        &mut self.line
    }
}

impl Drop for LineGuard<'_> {
    fn drop(&mut self) {
        self.waiting
            .store(self.line.waiters.len(), Ordering::Release);
    }
}

/// Idle workers, the most recently used on top (its caches are warm), and
/// the requests waiting for one, first come first served.
#[derive(Debug, Default)]
pub(crate) struct Line {
    idle: Vec<Worker>,
    waiters: VecDeque<Waiter>,
    next_waiter: u64,
    /// No more requests: the pool is stopping.
    closed: bool,
}

/// A request waiting for a worker.
#[derive(Debug)]
pub(crate) struct Waiter {
    id: u64,
    /// Small enough to be queued behind another request.
    queueable: bool,
    tx: oneshot::Sender<Assignment>,
}

impl Waiter {
    /// Gives the request what it waits for; back if it went away (to be
    /// given to the next). Not boxed: that would allocate on every
    /// hand-over, to save a move on the rare one that fails.
    #[allow(clippy::result_large_err)]
    pub fn send(self, assignment: Assignment) -> Result<(), Assignment> {
        self.tx.send(assignment)
    }
}

/// What a waiting request is given.
#[derive(Debug)]
pub(crate) enum Assignment {
    /// An idle worker: write the request and read the response.
    Worker(Worker),
    /// A place behind the request a worker has just started: write the
    /// request with this id, then wait for the handover.
    Queued {
        link: Arc<WorkerShared>,
        id: u32,
        handover: oneshot::Receiver<Handover>,
        state: Arc<AtomicU8>,
    },
}

impl Line {
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Refuses every waiting request (their receivers see the line
    /// dropped) and every later one, and returns the idle workers.
    pub fn close(&mut self) -> Vec<Worker> {
        self.closed = true;
        self.waiters.clear();
        std::mem::take(&mut self.idle)
    }

    /// Refuses every waiting request (their receivers see the line
    /// dropped), as when no worker can come: the pool's workers all fail
    /// to boot. Later requests still queue.
    pub fn refuse_waiters(&mut self) -> usize {
        let refused = self.waiters.len();
        self.waiters.clear();
        refused
    }

    /// The most recently used idle worker.
    pub fn pop_idle(&mut self) -> Option<Worker> {
        self.idle.pop()
    }

    /// Puts a worker on top of the idle stack.
    pub fn push_idle(&mut self, worker: Worker) {
        self.idle.push(worker);
    }

    /// Takes every idle worker (for a sweep, which puts back those it keeps).
    pub fn take_idle(&mut self) -> Vec<Worker> {
        std::mem::take(&mut self.idle)
    }

    /// Takes `link`'s worker off the idle stack, if it is there.
    pub fn remove_idle(&mut self, link: &Arc<WorkerShared>) -> Option<Worker> {
        let at = self
            .idle
            .iter()
            .position(|w| Arc::ptr_eq(&w.shared, link))?;
        Some(self.idle.remove(at))
    }

    pub fn idle_len(&self) -> usize {
        self.idle.len()
    }

    pub fn waiters_len(&self) -> usize {
        self.waiters.len()
    }

    /// Adds a request to the line: at the back, or at the front for one
    /// put back in line (its worker failed before reaching it). Returns
    /// its place, to withdraw it by, and where its assignment arrives.
    pub fn enqueue(
        &mut self,
        queueable: bool,
        first_in_line: bool,
    ) -> (u64, oneshot::Receiver<Assignment>) {
        let (tx, rx) = oneshot::channel();
        let id = self.next_waiter;
        self.next_waiter += 1;
        let waiter = Waiter { id, queueable, tx };
        if first_in_line {
            self.waiters.push_front(waiter);
        } else {
            self.waiters.push_back(waiter);
        }
        (id, rx)
    }

    /// Takes the request at place `id` out of the line; false if it has
    /// left it already (it was given something).
    pub fn withdraw(&mut self, id: u64) -> bool {
        let at = self.waiters.iter().position(|w| w.id == id);
        if let Some(at) = at {
            self.waiters.remove(at);
        }
        at.is_some()
    }

    /// The first request in line.
    pub fn pop_first(&mut self) -> Option<Waiter> {
        self.waiters.pop_front()
    }

    /// The first request in line that may be queued behind another.
    pub fn pop_queueable(&mut self) -> Option<Waiter> {
        let at = self.waiters.iter().position(|w| w.queueable)?;
        self.waiters.remove(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(line: &mut Line, pop: fn(&mut Line) -> Option<Waiter>) -> Vec<u64> {
        std::iter::from_fn(|| pop(line)).map(|w| w.id).collect()
    }

    #[test]
    fn requests_are_served_in_order_and_one_put_back_goes_first() {
        let waiting = WaitingLine::default();
        let mut line = waiting.lock();
        let (a, _ra) = line.enqueue(true, false);
        let (b, _rb) = line.enqueue(true, false);
        let (again, _rc) = line.enqueue(true, true);
        drop(line);
        assert_eq!(waiting.waiting(), 3);
        let mut line = waiting.lock();
        assert_eq!(ids(&mut line, Line::pop_first), [again, a, b]);
        drop(line);
        assert_eq!(waiting.waiting(), 0);
    }

    #[test]
    fn a_withdrawn_request_leaves_the_line_once() {
        let waiting = WaitingLine::default();
        let mut line = waiting.lock();
        let (a, _ra) = line.enqueue(false, false);
        let (b, _rb) = line.enqueue(false, false);
        assert!(line.withdraw(a));
        assert!(!line.withdraw(a));
        drop(line);
        assert_eq!(waiting.waiting(), 1);
        assert_eq!(ids(&mut waiting.lock(), Line::pop_first), [b]);
    }

    #[test]
    fn only_small_requests_are_offered_a_queue_place() {
        let mut line = Line::default();
        let (_big, _r1) = line.enqueue(false, false);
        let (small, _r2) = line.enqueue(true, false);
        assert_eq!(ids(&mut line, Line::pop_queueable), [small]);
        assert_eq!(line.waiters_len(), 1);
    }

    #[test]
    fn a_closed_line_drops_its_waiters() {
        let mut line = Line::default();
        let (_id, mut rx) = line.enqueue(true, false);
        assert!(line.close().is_empty());
        assert!(line.is_closed());
        assert!(rx.try_recv().is_err(), "the waiter sees its sender dropped");
        assert_eq!(line.waiters_len(), 0);
    }
}
