// Package search is the store-wide full-text index of event records: the
// text of a record (its JSON string values), its tokens, the parsing of a
// query into terms, the matching and ranking of one record's text against
// them, and the index's files (segments of postings) and their reading.
//
// It knows nothing of sessions or events beyond what the store above
// passes in: a document is a numbered (session, event) pair with a kind
// and role code, a time and its token count, and the store gives its
// record's bytes. The index is derived: the records in the sessions'
// chunks are the truth, and every file of the index can be removed,
// truncated or damaged without loss; a reader finding damage (a checksum
// that does not match, a length beyond the file, a decoder's limit)
// gets ErrDamaged and the caller rebuilds.
//
// # Matching
//
// A record's text is its JSON string values (object keys left out),
// joined by newlines. Its tokens are the maximal runs of letters and
// digits (Unicode), lower-cased; everything else separates them. A query
// is words and "double-quoted phrases"; each is a term, a term is the
// token sequence of its text, and a record matches a term when the
// term's tokens occur in the record's tokens consecutively (so a word
// such as foo_bar or a.go is the phrase of its tokens). A record matches
// the query when it matches every term. Matching is exact on whole
// tokens: there is no prefix or substring match.
//
// # Rank
//
// Rank depends on the record alone, so that the index and a scan agree:
// the sum over the query's distinct tokens of 1+ln(tf), where tf is the
// token's count in the record, divided by 1+ln(1+n/64) for a record of n
// tokens (a short record that names the words often ranks first).
//
// # Durability
//
// Segment files are written whole to a temporary name, synced, and renamed
// (internal/durable.ReplaceFile), then named in the manifest the same way;
// a crash leaves the old manifest and its segments, or the new one and
// its segments, and at worst unreferenced files that the next write
// removes. Nothing in the index is needed to read a session.
package search
