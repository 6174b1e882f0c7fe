package vfs

// The directory-change log of MemFS.
//
// Each directory keeps its durable entries (syncedChildren) and the log of
// the changes made to its entries since then, oldest first: an entry
// created (a file by OpenFile, a directory by MkdirAll), removed, or
// renamed in or out. A rename across two directories is one change, in
// the logs of both: it is kept or lost whole. SyncDir makes the changes of
// its directory's log durable, in log order, by applying them to the
// durable entries; a rename made durable by one of its directories takes
// with it the changes before it in the other's log, since one of them
// left there (the create of its source name, say) and kept by a crash
// clone would undo it.
//
// A crash clone starts from the durable entries and, in KeepRandomSectors,
// applies each change still in a log with probability one half, in log
// order (see CrashClone).
//
// A change acts on its file or directory (the node), not on a name: a
// rename or remove unlinks the node from wherever it is at that point
// (after an earlier rename was lost, under its old name), and a create or
// rename links it under its new name, replacing the node that name held.
// There are no hard links, so a node is under one name at most, in any
// state the changes are applied to.

// dirOp is the kind of a dirChange.
type dirOp int8

const (
	dirCreate dirOp = iota // to/toName is a new entry for node
	dirRemove              // node's entry from/fromName is gone
	dirRename              // node moved from from/fromName to to/toName
)

// dirChange is a change to directory entries that is not durable yet.
type dirChange struct {
	op       dirOp
	node     *memNode // the file or directory created, removed or renamed
	from     *memNode // the directory a remove or rename takes the node out of
	fromName string
	to       *memNode // the directory a create or rename puts the node in
	toName   string
	// durable: made durable by a SyncDir (and so out of the directories'
	// logs; it stays in MemFS.unsynced until that is compacted).
	durable bool
}

// dirs returns the directories whose logs hold c: one, or two for a
// rename across directories.
func (c *dirChange) dirs() []*memNode {
	switch {
	case c.op == dirCreate:
		return []*memNode{c.to}
	case c.op == dirRemove || c.from == c.to:
		return []*memNode{c.from}
	}
	return []*memNode{c.from, c.to}
}

// entryState is a state of directory entries that changes apply to: the
// durable one (syncedState), or a crash clone's in the making
// (crashState).
type entryState interface {
	// entries returns dir's entries, to read and change.
	entries(dir *memNode) map[string]*memNode
	// link returns the directory and name node is under (nil if none).
	link(node *memNode) (*memNode, string)
	// setLink records where node is (dir nil: nowhere).
	setLink(node, dir *memNode, name string)
}

// apply makes change c in s: the node leaves its entry (a remove, or the
// old name of a rename) and, for a create or rename, takes its new one,
// replacing whatever that name held.
func (c *dirChange) apply(s entryState) {
	if dir, name := s.link(c.node); dir != nil {
		if ents := s.entries(dir); ents[name] == c.node {
			delete(ents, name)
		}
		s.setLink(c.node, nil, "")
	}
	if c.op == dirRemove {
		return
	}
	ents := s.entries(c.to)
	if old, ok := ents[c.toName]; ok && old != c.node {
		s.setLink(old, nil, "")
	}
	ents[c.toName] = c.node
	s.setLink(c.node, c.to, c.toName)
}

// syncedState is the durable state: each directory's syncedChildren and
// each node's syncedIn/syncedName.
type syncedState struct{}

func (syncedState) entries(dir *memNode) map[string]*memNode { return dir.syncedChildren }

func (syncedState) link(n *memNode) (*memNode, string) { return n.syncedIn, n.syncedName }

func (syncedState) setLink(n, dir *memNode, name string) { n.syncedIn, n.syncedName = dir, name }

// crashState is the durable state with the changes a crash clone keeps
// applied on top, copied on write: dirs holds the entries of every
// directory a kept change touched, links where each node a kept change
// moved (or unlinked) is.
type crashState struct {
	dirs  map[*memNode]map[string]*memNode
	links map[*memNode]crashLink
}

type crashLink struct {
	dir  *memNode
	name string
}

func newCrashState() *crashState {
	return &crashState{dirs: map[*memNode]map[string]*memNode{}, links: map[*memNode]crashLink{}}
}

func (s *crashState) entries(dir *memNode) map[string]*memNode {
	ents, ok := s.dirs[dir]
	if !ok {
		ents = maps(dir.syncedChildren)
		s.dirs[dir] = ents
	}
	return ents
}

// children returns dir's entries after the crash, to read only.
func (s *crashState) children(dir *memNode) map[string]*memNode {
	if ents, ok := s.dirs[dir]; ok {
		return ents
	}
	return dir.syncedChildren
}

func (s *crashState) link(n *memNode) (*memNode, string) {
	if l, ok := s.links[n]; ok {
		return l.dir, l.name
	}
	return n.syncedIn, n.syncedName
}

func (s *crashState) setLink(n, dir *memNode, name string) {
	s.links[n] = crashLink{dir, name}
}

// logChange records c, just made to the current entries, in the logs of
// its directories and of m. The caller holds m.mu.
func (m *MemFS) logChange(c *dirChange) {
	m.unsynced = append(m.unsynced, c)
	for _, d := range c.dirs() {
		d.log = append(d.log, c)
	}
}

// syncDir makes every change in d's log durable, in order. The caller
// holds m.mu.
func (m *MemFS) syncDir(d *memNode) {
	for len(d.log) > 0 {
		m.persist(d.log[0])
	}
	d.log = nil
	if m.persisted > len(m.unsynced)/2 {
		live := m.unsynced[:0]
		for _, c := range m.unsynced {
			if !c.durable {
				live = append(live, c)
			}
		}
		clear(m.unsynced[len(live):])
		m.unsynced, m.persisted = live, 0
	}
}

// persist makes c durable, after the changes before it in the logs of its
// directories (for a rename across directories, the other one's too). c
// is in each of those logs, which persist keeps in order: every change
// persisted so far came off the front of its logs. The changes it
// persists first are older than c, so the recursion ends.
func (m *MemFS) persist(c *dirChange) {
	for _, d := range c.dirs() {
		for d.log[0] != c {
			m.persist(d.log[0])
		}
	}
	for _, d := range c.dirs() {
		d.log[0] = nil
		d.log = d.log[1:]
	}
	c.apply(syncedState{})
	c.durable = true
	m.persisted++
}
