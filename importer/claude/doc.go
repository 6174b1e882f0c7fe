// Package claude imports Claude Code transcripts (the JSONL files under
// ~/.claude/projects) into a sessionstore Store: Read parses one file,
// Import writes the sessions of files and directories.
//
// # Mapping
//
// Every line with a uuid is one or more events, in the uuid tree of the
// file: the first event of a line is the child of the last event of its
// parentUuid's line, and a line's events follow one another. So the
// tree is the file's own, branches included, with one exception: the
// lines of a response (one message.id) and the lines holding the results
// of its tool calls are chained in file order. Claude Code writes
// parallel tool calls one line each, each the child of the one before,
// and each result as the child of its own call's line, so the walk of
// parentUuid links from the leaf would pass through only some calls and
// results, while the context Claude Code sends holds them all (the API
// refuses a tool_use without its tool_result). Each event's id is
// importer.ID("claude:"+uuid, timestamp) (a line's later events add
// "#n" to the key): importing again finds every event it wrote.
//
//   - A user line: its text (string content, or text blocks, with a
//     placeholder such as "[image: image/png]" for other blocks) is a
//     user message; each tool_result block is a tool result (CallID the
//     tool_use_id, Output its text, IsError), in block order.
//   - An assistant line: an assistant message (text as Content,
//     thinking as Reasoning, the model, the line's usage, its tool_use
//     blocks as ToolCalls), then a tool call event per tool_use block.
//     The blocks Anthropic's API wants back verbatim, a thinking block
//     with its signature and a redacted_thinking block, are the
//     message's ProviderState, in block order: Provider "anthropic",
//     Type the block's type ("thinking", "redacted_thinking"), Data the
//     block's JSON exactly as the line holds it (the API's block:
//     {"type":"thinking","thinking":...,"signature":...} or
//     {"type":"redacted_thinking","data":...}), which an adapter sends
//     back as the block. It is never part of Content; a thinking block's
//     text is in Reasoning too, as for a thinking block without a
//     signature, which is not state.
//     Claude Code writes one response as several lines, one per content
//     block, each with its own uuid and the same message.id; each line
//     is its own event, because lines of one response can be parents of
//     other lines (a tool result answers the tool_use line, a branch can
//     start at any of them), and because merging them would make a
//     line's event change when the transcript grows, which a re-import
//     could not append. Each line repeats the response's usage, with the
//     output tokens streamed so far: a sum over events counts a response
//     once per line.
//   - A compact boundary (a system line, subtype compact_boundary) is a
//     KindCompaction event, the child of its logicalParentUuid's line,
//     whose Summary.Text is the text of the isCompactSummary user line
//     that follows it; that line is no event of its own (its uuid names
//     the compaction), so Load starts at the compaction, with the
//     summary, as Claude Code's context does. A boundary that is the
//     file's last record is left out (counted in File.Skipped) until the
//     file grows: its summary line is still to be written, and a
//     compaction once stored cannot take it later. A boundary whose
//     logicalParentUuid names no record of the file (the conversation it
//     compacted is in an earlier transcript, or was cut from this one)
//     follows the record before it in the file (or is the root), and is
//     a note (File.Notes, importer.Report.Notes), not a problem: Claude
//     Code's context starts at the boundary all the same, and so does
//     Load's.
//   - Every other line with a uuid (system lines, attachments,
//     progress, ...) is a KindCustom event whose record is the line
//     itself: such lines sit inside the uuid tree (a message's parent may
//     be one), and keeping them keeps the tree exact and loses nothing.
//     A harness building a model's context skips KindCustom events.
//   - Lines without a uuid are no events: a summary line names the
//     session holding its leafUuid (Meta.Name, in whichever file read it
//     is); file-history-snapshot, queue-operation, permission-mode,
//     last-prompt and others are skipped and counted (File.Skipped). A
//     file-history-snapshot line's backups become workspace snapshots
//     when ImportWith is given Claude Code's file history (see File
//     history).
//
// HEAD is the newest leaf (by timestamp, the later line on a tie), where
// Claude Code resumes: Load then gives the context it rebuilds, the walk
// of parentUuid links from that record (with each response whole, as
// above), stopping at a compaction.
//
// Meta: ID is importer.ID("claude:"+sessionId, first timestamp),
// WorkingDir the first cwd, Model the newest assistant model, CreatedAt
// the first timestamp, and the labels source ("claude-code"),
// source_path (the path as given, bytes that are not UTF-8 replaced by
// U+FFFD, as in a session or agent id taken from a file name),
// git_branch (the newest), claude_session_id,
// claude_version, and for a subagent claude_agent_id (and
// claude_agent_type, claude_agent_description from its .meta.json,
// whose description is its name when no summary names it).
//
// # File history
//
// Claude Code backs up the files its tools edit, so that a conversation
// can be rewound with its files: in ~/.claude/file-history/<sessionId>/
// it keeps each version of a tracked file as <backupFileName> (a hash of
// the path, "@v", the version), and the transcript's
// file-history-snapshot lines say which: trackedFileBackups maps each
// tracked file's path (relative to the working directory, or absolute)
// to its backup, or to a null backupFileName for a file that did not
// exist. A line that is not an update holds the files as they were when
// the user sent the message its messageId names (the line before it);
// an update (isSnapshotUpdate) adds a file to that snapshot when a tool
// first edits it, its backup the file before the edit, and its
// messageId is the line of that tool call.
//
// ImportWith with Options.FileHistory set to that directory records
// them as workspace snapshots of the session (sessionstore's
// Workspaces), with Store.RecordFiles: each line right after the last
// event of the record its messageId names, and the events the
// transcript has after that record follow the snapshot; for a line
// that is not an update, the files it names, for an update, those it
// adds; and of those, only the backups the workspace does not hold
// already at that place (a line names every tracked file, changed or
// not). A null backupFileName removes the file. A file's content is its
// backup file's bytes, its mode the backup file's permission bits. A
// snapshot's label is "claude-code file-history <messageId>", by which
// importing again finds it and records nothing twice; a transcript that
// grew is recorded as far as it goes. The snapshot event's id and time
// are the store's (RecordFiles assigns them), not derived from the
// transcript as the other events' are.
//
// Paths: an absolute path below the session's working directory
// (Meta.WorkingDir, the first cwd) is made relative to it; one outside it
// is skipped (counted in HistoryStats.Outside and told in a note: Claude
// Code tracks files such as its plans in ~/.claude/plans), and so is a
// path the workspace's rules refuse (a ".." or empty element, a "."
// element, not UTF-8), reported as a malformed line. A backupFileName
// must be a file name (no separator, not "." or ".."), else it is
// refused the same way and no file is read for it; a backup is read
// through an os.Root of the session's directory, only if it is a
// regular file there (not a link, a FIFO or a directory), and only up to
// the store's default record limit (a larger one, or one over the
// store's own limit, is counted in HistoryStats.TooLarge). A missing
// backup (Claude Code removes old ones) is counted in
// HistoryStats.Missing and told in a note; the rest of the session is
// imported. Without Options.FileHistory (Import), the lines are skipped
// as they always were, and ImportWith counts their backups in
// HistoryStats.NoHistory. A session imported without its file history
// cannot take its snapshots later: the events after their places are
// stored, and the store cannot put an event between an event and its
// children (HistoryStats.Late, and a note).
//
// # Subagents
//
// A subagent's transcript (agent-*.jsonl, beside the session's or under
// <session>/subagents/) and each tree of sidechain lines inside a
// session's own transcript are subagent sessions: ID
// importer.ID("claude:"+sessionId+"/agent-"+agentId, first timestamp),
// Meta.ParentSession the session of the same sessionId, and
// Meta.SpawnedBy the tool call whose result names the agentId (or a Task
// call whose prompt is the subagent's first message; a sidechain inside
// the file: the record it grew from), left unset when there is none (a
// warm-up agent has no call). Import writes them after their parent; a
// subagent whose parent is neither read by the same Import nor stored
// already is imported as a top-level session, and stays one (a
// session's lineage is fixed when it is made).
//
// # Bad input
//
// A malformed line (not JSON, no type, a conversation record without a
// valid timestamp or message, a timestamp outside 1970 to 2262, which the
// store cannot hold, a repeated uuid) is an *importer.LineError
// (errors.Is importer.ErrMalformed) naming the file and line, and is left
// out; the rest is imported. So is a line longer than
// importer.MaxLineSize (importer.ErrLineTooLong), which is never held
// whole. A file that looks like another tool's (a Pi session, a Codex
// rollout) is an *importer.FormatError and nothing of it is written. A
// session the store refuses for its content (importer.SessionProblem,
// such as a record over its Options.MaxRecordSize) is reported for its
// file, with no empty session left, and the other files are imported. A record whose parentUuid names no record of
// the file (a dangling parent, such as a line that was malformed), or a
// second root, is reported the same way and attached to the record before
// it in the file, so that the session stays one tree. A record whose
// parent comes later in the file waits for it. Records that name one
// another as parents (a cycle: their parents never come) are reported
// once per cycle, at the cycle's first line in the file, where the cycle
// is broken: that record is attached to the record before it, and the
// rest of the cycle, and the records below it, follow it. Reading takes
// time and memory linear in the file whatever the shape of its tree (no
// recursion follows the parent links).
//
// # Durability
//
// When Import returns, every session it reports written is durable
// (importer.Write's contract); after a crash, importing again completes
// what was cut short.
package claude
