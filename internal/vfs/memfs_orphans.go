package vfs

import (
	"path/filepath"
	"sort"
)

// Orphans returns the files and directories a power cut now would leave
// on the disk out of reach. A crash clone cannot show them (CrashClone
// builds the tree from the root, and drops them), but they are on the
// disk, and a file system check gathers them into lost+found: for private
// data, a leak. They are
//
//   - those with an entry made durable by a SyncDir, in a directory that
//     the durable entries do not reach from the root, because that
//     directory's own entry never became durable (MkdirAll, or a rename
//     into it, without a SyncDir of its parent) or its removal became
//     durable before its entries' removals did; each is named by its
//     durable path under the highest directory out of reach, which is
//     named by where it is now, or by where its newest removal or rename
//     not yet compacted took it from, or "?";
//   - the files that have a name now but no durable one (created or
//     renamed there, and no SyncDir of the directory since) and hold
//     synced data, which a crash keeps without a name; each is named by
//     its name now.
//
// The durable entries are those KeepSynced keeps; KeepRandomSectors may
// keep changes that link some of them back, or cut off others. The list
// is sorted.
func (m *MemFS) Orphans() []string {
	m.mu.Lock()
	defer m.mu.Unlock()

	// Every node that can have a durable entry: those the current or the
	// durable entries reach from the root, and those the changes not yet
	// compacted name (a node removed, or in a directory removed).
	live := map[*memNode]string{m.root: "/"}
	seen := map[*memNode]bool{}
	var stack []*memNode
	push := func(n *memNode) {
		if n != nil && !seen[n] {
			seen[n] = true
			stack = append(stack, n)
		}
	}
	push(m.root)
	for _, c := range m.unsynced {
		push(c.node)
		push(c.from)
		push(c.to)
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range n.children {
			push(c)
		}
		for _, c := range n.syncedChildren {
			push(c)
		}
	}
	// The current paths, from the root.
	stack = append(stack[:0], m.root)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for name, c := range n.children {
			live[c] = filepath.Join(live[n], name)
			stack = append(stack, c)
		}
	}
	// What the durable entries reach.
	reached := map[*memNode]bool{m.root: true}
	stack = append(stack[:0], m.root)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range n.syncedChildren {
			reached[c] = true
			stack = append(stack, c)
		}
	}
	// Where a node out of reach was taken from, by its newest removal or
	// rename.
	takenFrom := map[*memNode]string{}
	for _, c := range m.unsynced {
		if c.op != dirCreate {
			if p, ok := live[c.from]; ok {
				takenFrom[c.node] = filepath.Join(p, c.fromName)
			}
		}
	}

	var out []string
	for n := range seen {
		if p, ok := live[n]; ok && !n.dir && n.syncedIn == nil && len(n.synced) > 0 {
			out = append(out, p)
			continue
		}
		if reached[n] || n.syncedIn == nil {
			continue
		}
		// Up the durable entries to the highest node out of reach.
		names := []string{n.syncedName}
		top := n.syncedIn
		for steps := 0; top.syncedIn != nil && steps < len(seen); steps++ {
			names = append(names, top.syncedName)
			top = top.syncedIn
		}
		base, ok := live[top]
		if !ok {
			if base, ok = takenFrom[top]; !ok {
				base = "?"
			}
		}
		for i := len(names) - 1; i >= 0; i-- {
			base = filepath.Join(base, names[i])
		}
		out = append(out, base)
	}
	sort.Strings(out)
	return out
}
