// Package index is a session's index in memory (Mem): its events' entries
// in log order, each found by id, checked as a tree as they are added
// (every parent known, every id new).
//
// Mem holds memory only: it opens, writes and syncs no file, so a crash
// takes it whole and leaves nothing of it; it is rebuilt from index.jsonl,
// the sealed chunks' embedded indexes and the chunk lines, which the
// packages above read. It is not safe for concurrent use: the open
// session's mutex guards it.
//
// On return Add and Adopt have added every entry they accepted; on an
// error the entries end before the one refused (the valid prefix), and
// the ids map names exactly the entries held.
package index
