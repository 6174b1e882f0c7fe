package vfs

import "sync"

// Mutating reports whether op changes the filesystem (what a crash can
// interrupt); reads and opens of existing files do not. An open with
// O_TRUNC of an existing file is seen as OpOpen and then OpTruncate.
func Mutating(op Op) bool {
	switch op {
	case OpRead, OpOpen:
		return false
	}
	return true
}

// FailNth returns a fault hook that fails the n-th operation (counting from
// 1) among those in ops, with err, and lets every other operation through.
// Its Count method reports how many matching operations it has seen.
func FailNth(n int, err error, ops ...Op) *NthFault {
	set := map[Op]bool{}
	for _, op := range ops {
		set[op] = true
	}
	return &NthFault{n: n, err: err, ops: set}
}

// NthFault is the hook FailNth builds; install it with
// MemFS.SetFault(f.Hook).
type NthFault struct {
	mu    sync.Mutex
	n     int
	err   error
	ops   map[Op]bool
	count int
	fired bool
}

// Hook is the FaultFunc.
func (f *NthFault) Hook(op Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ops[op] {
		return nil
	}
	f.count++
	if f.count == f.n {
		f.fired = true
		return f.err
	}
	return nil
}

// Count is the number of matching operations seen so far.
func (f *NthFault) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// Fired reports whether the fault was injected.
func (f *NthFault) Fired() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}
