package sessionstore

import (
	"errors"
	"maps"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// storeCatalogue is the Store's catalogue (internal/catalogue: a derived
// copy of every session.json at the root, read by List and ListRecent) in
// the store's own words: it turns Meta into the catalogue's Meta and
// back, member for member, and reads session.json (readMetaInto) where
// the catalogue cannot vouch for it. It is the metaWatcher the registry
// hands each open session.
type storeCatalogue struct {
	*catalogue.Catalogue
	fsys     vfs.FS
	sessions string // the sessions directory
}

func newCatalogue(dir string, opts *Options) *storeCatalogue {
	fsys := opts.fs
	c := catalogue.New(catalogue.Config{
		FS:       fsys,
		Root:     dir,
		FileMode: opts.FileMode,
		ReadOnly: opts.ReadOnly,
		Logger:   opts.Logger,
		ReadMeta: func(sdir string, id uuid.UUID, buf []byte) (catalogue.Meta, []byte, error) {
			m, _, buf, err := readMetaInto(fsys, sdir, id, buf)
			if errors.Is(err, ErrNotFound) {
				return catalogue.Meta{}, buf, catalogue.ErrAbsent
			}
			return catMeta(m), buf, err
		},
	})
	return &storeCatalogue{Catalogue: c, fsys: fsys, sessions: filepath.Join(dir, sessionsDir)}
}

// willWrite is step 1 of the catalogue's protocol (catalogue.WillWrite),
// for metaWatcher, Create and Delete.
func (c *storeCatalogue) willWrite(id uuid.UUID, change func() (skip bool, err error)) error {
	return c.WillWrite(id, change)
}

// wrote is step 3 (catalogue.Wrote): m is durable in session.json.
func (c *storeCatalogue) wrote(m Meta) error { return c.Wrote(catMeta(m)) }

// catMeta is m as the catalogue records it, sharing nothing with m.
func catMeta(m Meta) catalogue.Meta {
	c := catalogue.Meta{ID: m.ID, Name: m.Name, WorkingDir: m.WorkingDir, Model: m.Model,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Labels: maps.Clone(m.Labels),
		ParentSession: m.ParentSession, SpawnedBy: m.SpawnedBy, Depth: m.Depth, Encrypted: m.Encrypted}
	if f := m.ForkedFrom; f != nil {
		c.ForkedFrom = &catalogue.ForkPoint{Session: f.Session, Event: f.Event}
	}
	if u := m.Usage; u != nil {
		cu := &catalogue.Usage{Events: u.Events, Through: u.Through, Models: make([]catalogue.ModelUsage, len(u.Models))}
		for i, mu := range u.Models {
			cu.Models[i] = catalogue.ModelUsage{Model: mu.Model, Messages: mu.Messages, Input: mu.InputTokens,
				Output: mu.OutputTokens, CacheRead: mu.CacheReadTokens, CacheWrite: mu.CacheWriteTokens}
		}
		c.Usage = cu
	}
	return c
}

// metaOf is the catalogue's c as a Meta. It shares c's Labels: a Meta the
// catalogue hands a reader (a State's, Backwards') is that reader's own.
func metaOf(c catalogue.Meta) Meta {
	m := Meta{ID: c.ID, Name: c.Name, WorkingDir: c.WorkingDir, Model: c.Model,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Labels: c.Labels,
		ParentSession: c.ParentSession, SpawnedBy: c.SpawnedBy, Depth: c.Depth, Encrypted: c.Encrypted}
	if f := c.ForkedFrom; f != nil {
		m.ForkedFrom = &ForkPoint{Session: f.Session, Event: f.Event}
	}
	if cu := c.Usage; cu != nil {
		u := &RecordedUsage{Events: cu.Events, Through: cu.Through}
		if len(cu.Models) > 0 {
			u.Models = make([]ModelUsage, len(cu.Models))
		}
		for i, mu := range cu.Models {
			u.Models[i] = ModelUsage{Model: mu.Model, Messages: mu.Messages, Usage: Usage{InputTokens: mu.Input,
				OutputTokens: mu.Output, CacheReadTokens: mu.CacheRead, CacheWriteTokens: mu.CacheWrite}}
		}
		m.Usage = u
	}
	return m
}

// resolveMeta returns session id's metadata from the catalogue's entry e
// when it is usable (catalogue.State.Lookup) and session.json's stamp is
// still the recorded one (e.Fresh), else from session.json. buf is a
// reading buffer, returned for reuse.
func resolveMeta(fsys vfs.FS, sdir string, id uuid.UUID, e catalogue.Entry, usable bool, buf []byte) (Meta, []byte, error) {
	if usable && e.Fresh(fsys, sdir) {
		return metaOf(e.Meta), buf, nil
	}
	m, _, buf, err := readMetaInto(fsys, sdir, id, buf)
	return m, buf, err
}

// recent returns up to n sessions, newest first, from the catalogue
// without reading the whole snapshot (catalogue.Backwards). ok is false
// when the catalogue cannot answer: the caller lists all sessions
// instead.
func (c *storeCatalogue) recent(n int) (metas []Meta, bad []UnreadableSession, ok bool) {
	var buf []byte
	_, ok = c.Backwards(nil, func() bool { return len(metas) < n }, func(id uuid.UUID, e catalogue.Entry, usable bool) {
		if usable { // the sessions directory is as recorded (Backwards)
			metas = append(metas, metaOf(e.Meta))
			return
		}
		sdir := filepath.Join(c.sessions, id.String())
		m, _, b, err := readMetaInto(c.fsys, sdir, id, buf)
		buf = b
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			bad = append(bad, UnreadableSession{ID: id, Path: filepath.Join(sdir, metaFile), Err: err})
		default:
			metas = append(metas, m)
		}
	})
	if !ok {
		return nil, nil, false
	}
	return metas, bad, true
}

// sessionIDs lists the session directories under root in id order.
func sessionIDs(fsys vfs.FS, root string) ([]uuid.UUID, error) {
	return catalogue.SessionIDs(fsys, root)
}
