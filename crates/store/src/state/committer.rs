//! The one writer of a cursor database: a thread that owns the connection and does
//! what the connectors of its state directory ask, in the order they ask it.
//!
//! Commits that arrive while it is busy wait in its queue, and it takes all of them
//! into the next transaction: one fsync covers every connector that committed at
//! about the same time (group commit). Nobody waits longer for it, since nobody waits
//! for anything but the fsync they would have paid alone; a thousand connectors
//! committing together pay for a few fsyncs instead of a thousand.
//!
//! A transaction is fsynced (`synchronous=FULL`) when any commit in it asks for that
//! ([`Durability::EveryCommit`]); otherwise it is left to the operating system and
//! the database is synced at most every interval while commits come, and when the
//! thread ends. Either way a committed transaction survives `kill -9` of ferry.
//!
//! A commit that is not fsynced, asked while the writer is idle and no other ask is
//! being answered, is done on the asking thread instead (under the same lock, so
//! still one writer at a time): it costs a few microseconds of SQLite, where the
//! round trip to the writer thread costs two thread wake-ups, tens of microseconds
//! each on a small virtual machine. With other asks in flight it goes to the thread
//! all the same, to share their transaction: done in place, the commits of many
//! connectors each took a transaction of their own on the async runtime's threads.
//! Commits that wait for an fsync still go to the thread, so that no async runtime
//! thread ever blocks on the disk.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rusqlite::TransactionBehavior;

use super::database::{self, FORMAT, Imported};
use super::{Committed, Durability, StateError};
use crate::sqlite::{self, Database};
use ferry_engine::delivery::Receipt;

/// How many commits one transaction takes at most: enough to share an fsync among
/// many connectors, few enough that the first of them is not kept waiting long.
const MOST_IN_ONE_TRANSACTION: usize = 1024;

/// How many commits the write-ahead log takes before the writer thread checkpoints
/// it (copies it into the database, fsyncing both). SQLite's own automatic checkpoint
/// is off on this connection, since it would run inside whichever commit crossed the
/// line, and that may be one done in place on an async runtime's thread.
const COMMITS_BETWEEN_CHECKPOINTS: u32 = 1000;

/// The writer thread of one cursor database; it ends (syncing what it has not yet)
/// when this is dropped.
pub struct Committer {
    path: PathBuf,
    /// The connection and what is on disk: the thread's, and an idle writer's for a
    /// commit done in place.
    writer: Arc<Mutex<Writer>>,
    sender: Option<mpsc::Sender<Work>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Asks being answered now: while another is, a commit goes to the thread to be
    /// grouped with it rather than done in place in a transaction of its own.
    in_flight: Arc<AtomicU64>,
    /// Transactions committed so far: fewer than the commits when they were grouped.
    #[cfg_attr(not(test), allow(dead_code))]
    transactions: Arc<AtomicU64>,
}

impl std::fmt::Debug for Committer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer").field("path", &self.path).finish()
    }
}

/// Where the answer to one piece of work goes: a waiting thread or task.
type Reply = Box<dyn FnOnce(Result<Done, StateError>) + Send>;

/// What a connector asks of the writer.
pub enum Ask {
    /// Commit the next generation of `key`'s cursor.
    Commit { key: Arc<str>, state: Vec<u8>, receipt: Receipt, durability: Durability },
    /// Make `committed` `key`'s cursor, as found durable elsewhere (the local log).
    Restore { key: Arc<str>, committed: Committed, durability: Durability },
    /// Take `key`'s lineage (drawing one, or taking the imported cursor's), and check
    /// its cursor.
    Take { key: Arc<str>, imported: Option<Imported> },
    /// Read `key`'s cursor.
    Read { key: Arc<str> },
    /// Put `key`'s cursor and lineage aside.
    Reset { key: Arc<str> },
    /// Put everything committed on disk now.
    Sync,
    /// Do nothing until told to go on: lets a test queue work behind it.
    #[cfg(test)]
    Pause(mpsc::Receiver<()>),
}

/// What the writer did.
pub enum Done {
    Committed(Committed),
    Restored,
    Taken(Taken),
    Read(Option<Committed>),
    Reset(bool),
    Synced,
}

/// A connector's lineage and cursor, as it is taken.
pub struct Taken {
    pub lineage: u128,
    /// Whether this take stored the lineage (and the imported cursor, if any).
    pub stored: bool,
}

struct Work {
    ask: Ask,
    reply: Reply,
}

impl Committer {
    /// Open (or create) the cursor database at `path` and start its writer.
    pub fn start(path: &Path) -> Result<Committer, StateError> {
        let database = sqlite::open_or_create(path, &FORMAT)?;
        database
            .connection()
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| database.error("cannot set up the connection", e))?;
        let (sender, receiver) = mpsc::channel();
        let transactions = Arc::new(AtomicU64::new(0));
        let writer = Arc::new(Mutex::new(Writer::new(database, transactions.clone())));
        let thread_writer = writer.clone();
        let thread = std::thread::Builder::new()
            .name("ferry-state".into())
            .spawn(move || run(&thread_writer, receiver))
            .map_err(|e| StateError::Io(format!("{}: cannot start its writer: {e}", path.display())))?;
        Ok(Committer {
            path: path.to_path_buf(),
            writer,
            sender: Some(sender),
            thread: Some(thread),
            in_flight: Arc::new(AtomicU64::new(0)),
            transactions,
        })
    }

    /// How many transactions of commits the writer has committed.
    #[cfg(test)]
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Ask, and wait for the answer on this thread (not on an async runtime's).
    pub fn ask_blocking(&self, ask: Ask) -> Result<Done, StateError> {
        let (sender, receiver) = mpsc::sync_channel(1);
        self.send(ask, Box::new(move |done| drop(sender.send(done))))?;
        receiver.recv().map_err(|_| self.gone())?
    }

    /// Ask, and await the answer.
    pub async fn ask(&self, ask: Ask) -> Result<Done, StateError> {
        let others = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _answered = InFlight(&self.in_flight);
        let ask = match others {
            0 => match self.in_place(ask) {
                Ok(done) => return done,
                Err(ask) => ask,
            },
            _ => ask,
        };
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.send(ask, Box::new(move |done| drop(sender.send(done))))?;
        receiver.await.map_err(|_| self.gone())?
    }

    /// A commit that is not fsynced, done on this thread if the writer is idle; the
    /// ask back otherwise (or when it must wait for an fsync), for the thread.
    fn in_place(&self, ask: Ask) -> Result<Result<Done, StateError>, Ask> {
        let Ask::Commit { durability: Durability::Interval(every), .. } = ask else { return Err(ask) };
        let Ok(mut writer) = self.writer.try_lock() else { return Err(ask) };
        if writer.synced_at.elapsed() >= every || writer.commits_since_checkpoint + 1 >= COMMITS_BETWEEN_CHECKPOINTS {
            // This commit is the one to sync or checkpoint after: the thread's.
            return Err(ask);
        }
        let (sender, receiver) = mpsc::sync_channel(1);
        writer.commit_group(vec![Work { ask, reply: Box::new(move |done| drop(sender.send(done))) }], false);
        drop(writer);
        Ok(receiver.try_recv().unwrap_or_else(|_| Err(self.gone())))
    }

    /// How many commits were done in place rather than by the thread.
    #[cfg(test)]
    pub fn in_place_commits(&self) -> u64 {
        self.writer.lock().map(|writer| writer.in_place).unwrap_or(0)
    }

    fn send(&self, ask: Ask, reply: Reply) -> Result<(), StateError> {
        let sender = self.sender.as_ref().ok_or_else(|| self.gone())?;
        sender.send(Work { ask, reply }).map_err(|_| self.gone())
    }

    fn gone(&self) -> StateError {
        StateError::Io(format!("{}: the writer of the cursor database stopped", self.path.display()))
    }
}

/// One ask being answered, counted in [`Committer::in_flight`] until dropped.
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer thread: what is asked, in order, each piece under the writer's lock;
/// the commits queued together in one transaction. Syncs what it has not when the
/// last sender is gone.
fn run(writer: &Mutex<Writer>, receiver: mpsc::Receiver<Work>) {
    // A panic while holding the lock cannot leave SQLite half-written (a transaction
    // not committed is rolled back), so the writer is usable after it.
    let lock = || writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut queue = VecDeque::new();
    while let Ok(first) = receiver.recv() {
        queue.push_back(first);
        queue.extend(receiver.try_iter());
        while let Some(work) = queue.pop_front() {
            if !matches!(work.ask, Ask::Commit { .. } | Ask::Restore { .. }) {
                let done = lock().one(work.ask);
                (work.reply)(done);
                // What arrived meanwhile joins the queue, so that the commits among it
                // are grouped together rather than split at the moment this began.
                queue.extend(receiver.try_iter());
                continue;
            }
            // This commit and those queued right behind it: one transaction.
            let mut group = vec![work];
            while group.len() < MOST_IN_ONE_TRANSACTION
                && matches!(queue.front().map(|w| &w.ask), Some(Ask::Commit { .. } | Ask::Restore { .. }))
            {
                group.extend(queue.pop_front());
            }
            lock().commit_group(group, true);
        }
    }
    let writer = lock();
    if writer.unsynced
        && let Err(error) = writer.database.sync()
    {
        tracing::warn!("the committed cursors could not be synced to disk at close: {error}");
    }
}

/// The thread's side: the connection, and what is on disk.
struct Writer {
    database: Database,
    transactions: Arc<AtomicU64>,
    /// Whether the connection's `synchronous` is FULL (else NORMAL).
    full: bool,
    /// Whether something was committed without an fsync since the last sync.
    unsynced: bool,
    synced_at: Instant,
    /// Commits since the last checkpoint (see [`COMMITS_BETWEEN_CHECKPOINTS`]).
    commits_since_checkpoint: u32,
    /// Commits done in place, for the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    in_place: u64,
}

/// A commit waiting in the queue, apart from its reply.
enum Change {
    Commit { key: Arc<str>, state: Vec<u8>, receipt: Receipt },
    Restore { key: Arc<str>, committed: Committed },
}

impl Writer {
    fn new(database: Database, transactions: Arc<AtomicU64>) -> Writer {
        Writer {
            database,
            transactions,
            full: true,
            unsynced: false,
            synced_at: Instant::now(),
            commits_since_checkpoint: 0,
            in_place: 0,
        }
    }

    /// Commit every change of `group` in one transaction, fsynced if any asks for it,
    /// and answer each: all committed, or all refused with the same error. Syncs if
    /// the interval is up, when `may_sync` (on the writer thread; a commit done in
    /// place leaves that to the next commit on the thread).
    fn commit_group(&mut self, group: Vec<Work>, may_sync: bool) {
        let mut changes = Vec::with_capacity(group.len());
        let mut replies = Vec::with_capacity(group.len());
        let mut full = false;
        let mut interval = Duration::MAX;
        for Work { ask, reply } in group {
            let (change, durability) = match ask {
                Ask::Commit { key, state, receipt, durability } => (Change::Commit { key, state, receipt }, durability),
                Ask::Restore { key, committed, durability } => (Change::Restore { key, committed }, durability),
                _ => unreachable!("only commits are grouped"),
            };
            match durability {
                Durability::EveryCommit => full = true,
                Durability::Interval(every) => interval = interval.min(every),
            }
            changes.push(change);
            replies.push(reply);
        }
        let written = self.set_full(full).and_then(|()| {
            self.database
                .write("cannot save the cursor", |connection| {
                    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let mut done = Vec::with_capacity(changes.len());
                    for change in changes {
                        done.push(match change {
                            Change::Commit { key, state, receipt } => {
                                Done::Committed(database::commit(&transaction, &key, state, receipt)?)
                            }
                            Change::Restore { key, committed } => {
                                database::put_row(&transaction, &key, &committed)?;
                                Done::Restored
                            }
                        });
                    }
                    transaction.commit()?;
                    Ok(done)
                })
                .map_err(StateError::from)
        });
        match written {
            Ok(done) => {
                self.transactions.fetch_add(1, Ordering::Relaxed);
                if !may_sync {
                    self.in_place += 1;
                }
                self.committed(full, interval, may_sync);
                for (reply, done) in replies.into_iter().zip(done) {
                    reply(Ok(done));
                }
            }
            Err(error) => {
                for reply in replies {
                    reply(Err(error.clone()));
                }
            }
        }
    }

    /// After a commit: on disk already, or synced if the interval is up, and the log
    /// checkpointed when it has grown; both only on the thread (`may_sync`).
    fn committed(&mut self, full: bool, interval: Duration, may_sync: bool) {
        self.commits_since_checkpoint += 1;
        if full {
            (self.unsynced, self.synced_at) = (false, Instant::now());
        } else {
            self.unsynced = true;
        }
        let due = (self.unsynced && self.synced_at.elapsed() >= interval)
            || self.commits_since_checkpoint >= COMMITS_BETWEEN_CHECKPOINTS;
        if !may_sync || !due {
            return;
        }
        // Committed already; this only moves it to the disk sooner (and keeps the
        // log short). A failure here is the disk's, and the next commits will meet it
        // too.
        if let Err(error) = self.database.sync() {
            tracing::warn!("the committed cursors could not be synced to disk: {error}");
        }
        self.synced();
    }

    /// Everything committed is on disk now, and the log checkpointed.
    fn synced(&mut self) {
        (self.unsynced, self.synced_at, self.commits_since_checkpoint) = (false, Instant::now(), 0);
    }

    fn set_full(&mut self, full: bool) -> Result<(), StateError> {
        if self.full != full {
            let value = if full { "FULL" } else { "NORMAL" };
            let connection = self.database.connection();
            connection
                .pragma_update(None, "synchronous", value)
                .map_err(|e| self.database.error("cannot set up the connection", e))?;
            self.full = full;
        }
        Ok(())
    }

    /// Everything but a commit, alone.
    fn one(&mut self, ask: Ask) -> Result<Done, StateError> {
        match ask {
            Ask::Read { key } => Ok(Done::Read(database::read(&self.database, &key)?)),
            Ask::Take { key, imported } => {
                // Not fsynced: nothing depends on a new lineage until a commit, and
                // the host syncs once when it has taken every connector's state.
                // An imported cursor is synced by the caller before the file it came
                // from is put aside.
                self.set_full(false)?;
                let (lineage, stored) = self.database.write("cannot take the state", |connection| {
                    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let taken = database::take(&transaction, &key, imported.as_ref())?;
                    transaction.commit()?;
                    Ok(taken)
                })?;
                self.unsynced |= stored;
                // Read once now, so that a damaged cursor stops the connector before
                // it starts.
                database::read(&self.database, &key)?;
                Ok(Done::Taken(Taken { lineage, stored }))
            }
            Ask::Reset { key } => {
                self.set_full(true)?;
                let had = self.database.write("cannot reset the state", |connection| {
                    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let had = database::reset(&transaction, &key)?;
                    transaction.commit()?;
                    Ok(had)
                })?;
                (self.unsynced, self.synced_at) = (false, Instant::now());
                Ok(Done::Reset(had))
            }
            Ask::Sync => {
                if self.unsynced {
                    self.database.sync()?;
                    self.synced();
                }
                Ok(Done::Synced)
            }
            #[cfg(test)]
            Ask::Pause(go_on) => {
                let _ = go_on.recv();
                Ok(Done::Synced)
            }
            Ask::Commit { .. } | Ask::Restore { .. } => unreachable!("commits are grouped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits queued while the writer is busy go into one transaction, and each is
    /// answered with its own generation.
    #[test]
    fn commits_that_arrive_together_share_one_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let committer = Committer::start(&dir.path().join("cursors.db")).unwrap();
        let (go_on, paused) = mpsc::channel();
        let (answered, answers) = mpsc::channel();
        let reply = |answered: &mpsc::Sender<_>| -> Reply {
            let answered = answered.clone();
            Box::new(move |done| drop(answered.send(done)))
        };
        committer.send(Ask::Pause(paused), reply(&answered)).unwrap();
        for n in 0..100u8 {
            let key: Arc<str> = format!("c{}", n % 10).into();
            let commit =
                Ask::Commit { key, state: vec![n], receipt: Receipt::default(), durability: Durability::EveryCommit };
            committer.send(commit, reply(&answered)).unwrap();
        }
        assert_eq!(committer.transactions(), 0);
        go_on.send(()).unwrap();
        let mut generations = Vec::new();
        for _ in 0..101 {
            match answers.recv().unwrap().unwrap() {
                Done::Committed(committed) => generations.push(committed.generation),
                Done::Synced => {}
                _ => panic!("a commit answered with something else"),
            }
        }
        assert_eq!(committer.transactions(), 1, "100 commits, one transaction (one fsync)");
        generations.sort();
        let expected: Vec<u64> = (1..=10).flat_map(|g| [g; 10]).collect();
        assert_eq!(generations, expected, "ten connectors, ten generations each, in order");
    }

    fn interval_commit(key: &str, state: &[u8], every: Duration) -> Ask {
        Ask::Commit {
            key: key.into(),
            state: state.to_vec(),
            receipt: Receipt::default(),
            durability: Durability::Interval(every),
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }

    /// A commit that need not be fsynced, with the writer idle and the interval not
    /// up, is done in place, and is as committed as any: read back, and there after
    /// the writer is gone. One due for a sync goes to the thread, which syncs it.
    #[test]
    fn an_interval_commit_to_an_idle_writer_is_done_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursors.db");
        for every in [Duration::from_secs(3600), Duration::ZERO] {
            let committer = Committer::start(&path).unwrap();
            let Done::Committed(first) = block_on(committer.ask(interval_commit("a", b"1", every))).unwrap() else {
                panic!("a commit answered with something else")
            };
            let Done::Committed(second) = block_on(committer.ask(interval_commit("a", b"2", every))).unwrap() else {
                panic!("a commit answered with something else")
            };
            assert_eq!(second.generation, first.generation + 1);
            // With an interval of zero every commit is due for a sync: the thread's.
            let in_place = if every.is_zero() { 0 } else { 2 };
            assert_eq!(committer.in_place_commits(), in_place, "done in place (interval {every:?})");
            let Done::Read(Some(read)) = committer.ask_blocking(Ask::Read { key: "a".into() }).unwrap() else {
                panic!("no cursor read back")
            };
            assert_eq!((read.state.as_slice(), read.generation), (&b"2"[..], second.generation));
        }
        let committer = Committer::start(&path).unwrap();
        let Done::Read(Some(read)) = committer.ask_blocking(Ask::Read { key: "a".into() }).unwrap() else {
            panic!("the cursor did not outlive its writer")
        };
        assert_eq!((read.state.as_slice(), read.generation), (&b"2"[..], 4));
    }

    /// While another ask is being answered, an interval commit goes to the thread,
    /// to share a transaction with it, rather than take one of its own in place.
    #[test]
    fn an_interval_commit_while_another_ask_is_answered_goes_to_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let committer = Committer::start(&dir.path().join("cursors.db")).unwrap();
        let every = Duration::from_secs(3600);
        committer.in_flight.fetch_add(1, Ordering::AcqRel);
        assert!(matches!(block_on(committer.ask(interval_commit("a", b"1", every))).unwrap(), Done::Committed(_)));
        assert_eq!(committer.in_place_commits(), 0, "another ask was in flight: the thread's");
        committer.in_flight.fetch_sub(1, Ordering::AcqRel);
        assert!(matches!(block_on(committer.ask(interval_commit("a", b"2", every))).unwrap(), Done::Committed(_)));
        assert_eq!(committer.in_place_commits(), 1, "alone: in place");
        assert_eq!(committer.in_flight.load(Ordering::Acquire), 0, "every ask answered is counted out");
    }

    /// While the writer is busy, a commit waits its turn on the thread instead, and
    /// one that must be fsynced always does.
    #[test]
    fn a_commit_to_a_busy_writer_or_one_to_fsync_goes_to_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let committer = Committer::start(&dir.path().join("cursors.db")).unwrap();
        let every = Durability::EveryCommit;
        let ask = Ask::Commit { key: "f".into(), state: b"x".to_vec(), receipt: Receipt::default(), durability: every };
        assert!(matches!(block_on(committer.ask(ask)).unwrap(), Done::Committed(_)));
        assert_eq!(committer.in_place_commits(), 0, "an fsynced commit is the thread's");

        let (go_on, paused) = mpsc::channel();
        committer.send(Ask::Pause(paused), Box::new(|_| ())).unwrap();
        // The thread holds the writer once it has taken the pause.
        while committer.writer.try_lock().is_ok() {
            std::thread::yield_now();
        }
        let Err(ask) = committer.in_place(interval_commit("b", b"1", Duration::from_secs(3600))) else {
            panic!("a commit was done in place while the writer was busy")
        };
        // As `ask` does with what it is handed back.
        let (answered, answer) = mpsc::channel();
        committer.send(ask, Box::new(move |done| drop(answered.send(done)))).unwrap();
        go_on.send(()).unwrap();
        assert!(matches!(answer.recv().unwrap().unwrap(), Done::Committed(c) if c.generation == 1));
        assert_eq!(committer.in_place_commits(), 0, "the writer was busy: the thread committed it");
        assert_eq!(committer.transactions(), 2);
    }

    /// (frames in the write-ahead log, frames of it checkpointed), from another
    /// connection.
    fn log_frames(path: &Path) -> (i64, i64) {
        let connection = rusqlite::Connection::open(path).unwrap();
        connection.query_row("PRAGMA wal_checkpoint(NOOP)", [], |row| Ok((row.get(1)?, row.get(2)?))).unwrap()
    }

    /// SQLite's own checkpoint is off (it would run inside a commit done in place):
    /// the thread checkpoints every so many commits, and a commit that would be past
    /// that line is the thread's, whatever its durability.
    #[test]
    fn the_thread_checkpoints_the_log_every_so_many_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursors.db");
        let committer = Committer::start(&path).unwrap();
        let hour = Duration::from_secs(3600);
        for n in 1..COMMITS_BETWEEN_CHECKPOINTS {
            block_on(committer.ask(interval_commit("a", &n.to_le_bytes(), hour))).unwrap();
        }
        assert_eq!(committer.in_place_commits(), u64::from(COMMITS_BETWEEN_CHECKPOINTS) - 1);
        let (frames, checkpointed) = log_frames(&path);
        assert!(frames >= i64::from(COMMITS_BETWEEN_CHECKPOINTS) - 1 && checkpointed == 0, "{frames} {checkpointed}");
        block_on(committer.ask(interval_commit("a", b"last", hour))).unwrap();
        assert_eq!(committer.in_place_commits(), u64::from(COMMITS_BETWEEN_CHECKPOINTS) - 1, "the last: the thread's");
        let (frames, checkpointed) = log_frames(&path);
        assert_eq!(checkpointed, frames, "checkpointed after the last");

        // The same line for commits that are fsynced.
        let every = |n: u32| Ask::Commit {
            key: "b".into(),
            state: n.to_le_bytes().to_vec(),
            receipt: Receipt::default(),
            durability: Durability::EveryCommit,
        };
        for n in 1..COMMITS_BETWEEN_CHECKPOINTS {
            committer.ask_blocking(every(n)).unwrap();
        }
        let (frames, checkpointed) = log_frames(&path);
        assert!(checkpointed < frames, "not checkpointed before the line");
        committer.ask_blocking(every(0)).unwrap();
        let (frames, checkpointed) = log_frames(&path);
        assert_eq!(checkpointed, frames, "checkpointed at the line");
    }
}
