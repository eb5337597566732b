//! Members a server crash left in a consumer group, found and cleared.
//!
//! The Iggy server keeps a group's members in its metadata, and through its own
//! crash it keeps them although their sessions died with it: after a restart, a
//! member from before holds its partitions for good, nothing ever polls them, and
//! a sink that joins again is given the rest at best (the suite's `iggy_sinks`
//! shows it). No request removes another session's membership, so Ferry clears such
//! ghosts the only way the protocol allows: it deletes the group and creates it
//! again. A live member of another host loses its membership too, and joins again
//! when its next poll is refused.
//!
//! The group's stored offsets go with it, so they are kept first, under a plain
//! consumer of their own (`ferry-kept-<group>`, whose offsets no deletion of the
//! group touches). Members also store every offset there after the group's
//! ([`keep_offset`]): the server loses an offset now and then in its own crash, and
//! a partition whose group offset it lost, dealt to a member that never read it,
//! would otherwise be read again from its start. A member checks the first batch it polls of each partition after
//! joining against them ([`kept_offset`], and the reader's `behind_settled`): one
//! read from before the kept offset (the new group has none stored, so the server
//! hands out the partition from its start) is dropped, the kept offset stored, and
//! the partition polled again. The check is made where the partition is read, not
//! when joining, because the server deals the partitions again at every join and
//! leave: a member restoring "its" partitions at join could miss one that reached
//! another member in between, which then read it from its start. Kept offsets only
//! ever rise, and each was stored by a member after its batch was settled: two hosts
//! clearing the same ghosts at once, or one joining halfway, cost duplicates (a
//! batch in flight), never a loss.
//!
//! The server names a group's members by their place in it, not by session, so
//! ghosts are found by counting: a group with more members than connected sessions
//! that say they are in it has ghosts. Seeing other sessions takes the permission to
//! read the server's info; without it the group is left as it is, with a warning
//! that says what to grant.

use iggy::prelude::{
    Consumer, ConsumerGroupClient, ConsumerOffsetClient, Identifier, IggyClient, IggyError, StreamClient, SystemClient,
    TopicClient,
};

/// A consumer group on one topic.
pub(super) struct GroupOnTopic<'a> {
    pub stream_id: &'a Identifier,
    pub topic_id: &'a Identifier,
    pub group_id: &'a Identifier,
    /// The group's name.
    pub name: &'a str,
    /// `group` on `stream/topic`, for messages.
    pub at: String,
}

impl GroupOnTopic<'_> {
    fn consumer(&self) -> Consumer {
        Consumer::group(self.group_id.clone())
    }

    /// Where the group's offsets are kept while it is recreated.
    fn kept(&self) -> Result<Consumer, IggyError> {
        Ok(Consumer::new(Identifier::named(&format!("ferry-kept-{}", self.name))?))
    }

    async fn offset(&self, client: &IggyClient, consumer: &Consumer, partition: u32) -> Result<Option<u64>, IggyError> {
        let info = client.get_consumer_offset(consumer, self.stream_id, self.topic_id, Some(partition)).await?;
        Ok(info.map(|info| info.stored_offset))
    }
}

/// Clear the members of the group that no live session holds, keeping its stored
/// offsets (see [`restore_offsets`]). Returns how many were cleared.
pub(super) async fn clear_ghosts(client: &IggyClient, group: &GroupOnTopic<'_>) -> Result<usize, IggyError> {
    let Some(details) = client.get_consumer_group(group.stream_id, group.topic_id, group.group_id).await? else {
        return Ok(0);
    };
    // This session is a member: alone, it is no ghost.
    if details.members_count <= 1 {
        return Ok(0);
    }
    let (Some(stream), Some(topic)) =
        (client.get_stream(group.stream_id).await?, client.get_topic(group.stream_id, group.topic_id).await?)
    else {
        return Ok(0);
    };
    let live = match sessions_in(client, (stream.id, topic.id, details.id)).await {
        Ok(live) => live,
        Err(IggyError::Unauthorized) => {
            tracing::warn!(
                "{}: {} members, and this user may not look at the server's sessions (it lacks the permission to \
                 read the server's info) to see whether each is alive; if the server restarted, some may be left \
                 from before, and their partitions read by no one: grant that permission, or delete the group",
                group.at,
                details.members_count,
            );
            return Ok(0);
        }
        Err(e) => return Err(e),
    };
    let ghosts = (details.members_count as usize).saturating_sub(live);
    if ghosts == 0 {
        return Ok(0);
    }
    tracing::warn!(
        "{}: {} members, {live} of them live sessions: {ghosts} left from before a server restart hold partitions \
         no one reads; recreating the group, its offsets kept",
        group.at,
        details.members_count,
    );
    let (consumer, kept) = (group.consumer(), group.kept()?);
    let mut offsets = Vec::new();
    for partition in topic.partitions.iter().map(|p| p.id) {
        let Some(stored) = group.offset(client, &consumer, partition).await? else { continue };
        offsets.push(format!("{partition}: {stored}"));
        if group.offset(client, &kept, partition).await?.is_none_or(|kept| kept < stored) {
            client.store_consumer_offset(&kept, group.stream_id, group.topic_id, Some(partition), stored).await?;
        }
    }
    tracing::info!("{}: offsets kept (partition: offset): {}", group.at, offsets.join(", "));
    match client.delete_consumer_group(group.stream_id, group.topic_id, group.group_id).await {
        // Another host cleared it first.
        Ok(()) | Err(IggyError::ConsumerGroupIdNotFound(..) | IggyError::ConsumerGroupNameNotFound(..)) => {}
        Err(e) => return Err(e),
    }
    match client.create_consumer_group(group.stream_id, group.topic_id, group.name).await {
        Ok(_) | Err(IggyError::ConsumerGroupNameAlreadyExists(..)) => {}
        Err(e) => return Err(e),
    }
    client.join_consumer_group(group.stream_id, group.topic_id, group.group_id).await?;
    Ok(ghosts)
}

/// Keep `offset`, just stored for the group, under the kept consumer too. The server
/// truncates and rewrites an offset's file at every store, so a `kill -9` of it in
/// between leaves that partition with no offset at all: the group's and the kept one
/// are two files, written one after the other by a member, so such a crash loses at
/// most one of them, and the other is at most a batch behind.
pub(super) async fn keep_offset(
    client: &IggyClient,
    group: &GroupOnTopic<'_>,
    partition: u32,
    offset: u64,
) -> Result<(), IggyError> {
    client.store_consumer_offset(&group.kept()?, group.stream_id, group.topic_id, Some(partition), offset).await
}

/// The offset kept for `partition` (at the last store, or when the group was last
/// recreated), if any.
pub(super) async fn kept_offset(
    client: &IggyClient,
    group: &GroupOnTopic<'_>,
    partition: u32,
) -> Result<Option<u64>, IggyError> {
    group.offset(client, &group.kept()?, partition).await
}

/// How many connected sessions are members of the group numbered `(stream, topic,
/// group)`.
async fn sessions_in(client: &IggyClient, group: (u32, u32, u32)) -> Result<usize, IggyError> {
    let mut live = 0;
    for session in client.get_clients().await?.into_iter().filter(|c| c.consumer_groups_count > 0) {
        // A session that closed meanwhile is simply not counted.
        let Some(details) = client.get_client(session.client_id).await? else { continue };
        live += usize::from(details.consumer_groups.iter().any(|g| (g.stream_id, g.topic_id, g.group_id) == group));
    }
    Ok(live)
}
