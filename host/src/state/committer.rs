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

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::TransactionBehavior;

use super::database::{self, FORMAT, Imported};
use super::{Committed, Durability, StateError};
use crate::delivery::Receipt;
use crate::sqlite::{self, Database};

/// How many commits one transaction takes at most: enough to share an fsync among
/// many connectors, few enough that the first of them is not kept waiting long.
const MOST_IN_ONE_TRANSACTION: usize = 1024;

/// The writer thread of one cursor database; it ends (syncing what it has not yet)
/// when this is dropped.
pub struct Committer {
    path: PathBuf,
    sender: Option<mpsc::Sender<Work>>,
    thread: Option<std::thread::JoinHandle<()>>,
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
        let (sender, receiver) = mpsc::channel();
        let transactions = Arc::new(AtomicU64::new(0));
        let writer = Writer::new(database, transactions.clone());
        let thread = std::thread::Builder::new()
            .name("ferry-state".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| StateError::Io(format!("{}: cannot start its writer: {e}", path.display())))?;
        Ok(Committer { path: path.to_path_buf(), sender: Some(sender), thread: Some(thread), transactions })
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
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.send(ask, Box::new(move |done| drop(sender.send(done))))?;
        receiver.await.map_err(|_| self.gone())?
    }

    fn send(&self, ask: Ask, reply: Reply) -> Result<(), StateError> {
        let sender = self.sender.as_ref().ok_or_else(|| self.gone())?;
        sender.send(Work { ask, reply }).map_err(|_| self.gone())
    }

    fn gone(&self) -> StateError {
        StateError::Io(format!("{}: the writer of the cursor database stopped", self.path.display()))
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

/// The thread's side: the connection, and what is on disk.
struct Writer {
    database: Database,
    transactions: Arc<AtomicU64>,
    /// Whether the connection's `synchronous` is FULL (else NORMAL).
    full: bool,
    /// Whether something was committed without an fsync since the last sync.
    unsynced: bool,
    synced_at: Instant,
}

/// A commit waiting in the queue, apart from its reply.
enum Change {
    Commit { key: Arc<str>, state: Vec<u8>, receipt: Receipt },
    Restore { key: Arc<str>, committed: Committed },
}

impl Writer {
    fn new(database: Database, transactions: Arc<AtomicU64>) -> Writer {
        Writer { database, transactions, full: true, unsynced: false, synced_at: Instant::now() }
    }

    fn run(mut self, receiver: mpsc::Receiver<Work>) {
        let mut queue = VecDeque::new();
        while let Ok(first) = receiver.recv() {
            queue.push_back(first);
            queue.extend(receiver.try_iter());
            while let Some(work) = queue.pop_front() {
                if !matches!(work.ask, Ask::Commit { .. } | Ask::Restore { .. }) {
                    let done = self.one(work.ask);
                    (work.reply)(done);
                    continue;
                }
                // This commit and those queued right behind it: one transaction.
                let mut group = vec![work];
                while group.len() < MOST_IN_ONE_TRANSACTION
                    && matches!(queue.front().map(|w| &w.ask), Some(Ask::Commit { .. } | Ask::Restore { .. }))
                {
                    group.extend(queue.pop_front());
                }
                self.commit_group(group);
            }
        }
        if self.unsynced
            && let Err(error) = self.database.sync()
        {
            tracing::warn!("the committed cursors could not be synced to disk at close: {error}");
        }
    }

    /// Commit every change of `group` in one transaction, fsynced if any asks for it,
    /// and answer each: all committed, or all refused with the same error.
    fn commit_group(&mut self, group: Vec<Work>) {
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
                self.committed(full, interval);
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

    /// After a commit: on disk already, or synced if the interval is up.
    fn committed(&mut self, full: bool, interval: Duration) {
        if full {
            (self.unsynced, self.synced_at) = (false, Instant::now());
            return;
        }
        self.unsynced = true;
        if self.synced_at.elapsed() >= interval {
            // Committed already; this only moves it to the disk sooner. A failure
            // here is the disk's, and the next commits will meet it too.
            if let Err(error) = self.database.sync() {
                tracing::warn!("the committed cursors could not be synced to disk: {error}");
            }
            (self.unsynced, self.synced_at) = (false, Instant::now());
        }
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
                    (self.unsynced, self.synced_at) = (false, Instant::now());
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
}
