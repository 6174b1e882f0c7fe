package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// memObjects is an in-memory ObjectStore for the tests of remote
// sessions, with a clock the test moves and a hook that can fail calls.
type memObjects struct {
	mu      sync.Mutex
	objs    map[string]memObject
	clock   time.Time
	started time.Time      // set by followTime: the clock runs with the local one from then
	calls   map[string]int // by operation
	bytesIn int64          // bytes Get returned
	// fail, when set, is asked before each call; a non-nil error fails
	// it. after says whether the call is applied first (an answer lost
	// on the way back).
	fail func(op, key string) (err error, after bool)
	// gate, when set, is called at the start of each Create, without
	// m.mu: a test holds a Create in flight there.
	gate func(key string)
	// noListAfter makes ListAfter unsupported (errors.ErrUnsupported).
	noListAfter bool
	writes      uint64 // objects written, the tags of GetTagged
}

type memObject struct {
	data []byte
	mod  time.Time
	tag  uint64 // which write made it (GetTagged)
}

func newMemObjects() *memObjects {
	return &memObjects{objs: map[string]memObject{}, clock: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), calls: map[string]int{}}
}

// followTime makes the object store's clock run with the local clock from
// now on, for tests of what a holder does over time (lease renewal).
func (m *memObjects) followTime() {
	m.mu.Lock()
	m.started = time.Now()
	m.mu.Unlock()
}

// now is the object store's clock, with m.mu held.
func (m *memObjects) now() time.Time {
	if m.started.IsZero() {
		return m.clock
	}
	return m.clock.Add(time.Since(m.started))
}

// advance moves the object store's clock.
func (m *memObjects) advance(d time.Duration) {
	m.mu.Lock()
	m.clock = m.clock.Add(d)
	m.mu.Unlock()
}

func (m *memObjects) count(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

func (m *memObjects) keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// call counts op and asks the fault hook, with m.mu held.
func (m *memObjects) call(op, key string) (error, bool) {
	m.calls[op]++
	if m.fail == nil {
		return nil, false
	}
	return m.fail(op, key)
}

func (m *memObjects) Create(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		gate(key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ferr, after := m.call("create", key)
	if ferr != nil && !after {
		return ferr
	}
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("create %s: %w", key, ErrObjectExists)
	}
	m.writes++
	m.objs[key] = memObject{data: slices.Clone(data), mod: m.now(), tag: m.writes}
	return ferr
}

func (m *memObjects) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ferr, after := m.call("put", key)
	if ferr != nil && !after {
		return ferr
	}
	m.writes++
	m.objs[key] = memObject{data: slices.Clone(data), mod: m.now(), tag: m.writes}
	return ferr
}

// GetTagged is ObjectReplacer's: the tag is the number of the write that
// made the object.
func (m *memObjects) GetTagged(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ferr, _ := m.call("get", key); ferr != nil {
		return nil, "", ferr
	}
	o, ok := m.objs[key]
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", key, ErrObjectNotFound)
	}
	return slices.Clone(o.data), fmt.Sprint(o.tag), nil
}

// ReplaceIf is ObjectReplacer's.
func (m *memObjects) ReplaceIf(ctx context.Context, key string, data []byte, tag string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ferr, after := m.call("replace", key)
	if ferr != nil && !after {
		return ferr
	}
	if o, ok := m.objs[key]; !ok || fmt.Sprint(o.tag) != tag {
		return fmt.Errorf("replace %s: %w", key, ErrObjectChanged)
	}
	m.writes++
	m.objs[key] = memObject{data: slices.Clone(data), mod: m.now(), tag: m.writes}
	return ferr
}

func (m *memObjects) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ferr, _ := m.call("get", key); ferr != nil {
		return nil, ferr
	}
	o, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrObjectNotFound)
	}
	if off > int64(len(o.data)) {
		off = int64(len(o.data))
	}
	end := int64(len(o.data))
	if n >= 0 {
		end = min(end, off+n)
	}
	m.bytesIn += end - off
	return slices.Clone(o.data[off:end]), nil
}

func (m *memObjects) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ferr, _ := m.call("stat", key); ferr != nil {
		return ObjectInfo{}, ferr
	}
	o, ok := m.objs[key]
	if !ok {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrObjectNotFound)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.mod}, nil
}

func (m *memObjects) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ferr, _ := m.call("list", prefix); ferr != nil {
		return nil, ferr
	}
	var out []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
		}
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memObjects) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ferr, after := m.call("delete", key)
	if ferr != nil && !after {
		return ferr
	}
	delete(m.objs, key)
	return ferr
}

// untombed returns the keys of session id's log objects that are not
// tombstones (seam.Tombstone).
func (m *memObjects) untombed(id uuid.UUID) []string {
	tomb := seam.Tombstone()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, o := range m.objs {
		if strings.HasPrefix(k, seam.LogPrefix(id)) && !bytes.Equal(o.data, tomb) {
			out = append(out, k)
		}
	}
	return out
}

// ListAfter lists as List does, from after on: memObjects is an
// ObjectListerAfter (unless noListAfter).
func (m *memObjects) ListAfter(ctx context.Context, prefix, after string, limit int) ([]ObjectInfo, error) {
	if m.noListAfter {
		return nil, errors.ErrUnsupported
	}
	all, err := m.List(ctx, prefix, 0)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(all, after, func(o ObjectInfo, k string) int { return strings.Compare(o.Key, k) })
	for i < len(all) && all[i].Key <= after {
		i++
	}
	out := all[i:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
