package sessionstore

import (
	"bytes"
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// Encrypted sessions on object storage
//
// With Options.Remote, the object store is the system of record, and an
// encrypted session's key record lives there too, as the object
// keys/<session>.json (seam.KeyObject), outside the session's prefix.
// Records leave the process sealed, as on disk (encrypt.go): chunk lines,
// sealed chunks, blobs and log objects hold envelopes only.
//
//   - Create puts the key object (a Create-only write) before the session's
//     log exists, so that every Store that can open the session finds its
//     key. An object already there is a key record a Create of the same
//     id left (one cut short, or one running at the same moment on
//     another root): this Create adopts it, its data key unwrapped, so
//     that whichever Create makes the log, the key object holds the key
//     the session is sealed under.
//   - A Store that opens the session and has no local key record (another
//     root, a restore) reads the key object and keeps a copy in its
//     keys/, the local cache the key cache stamps (encrypt.go).
//   - Delete destroys the key object (and, with an ObjectVersionDeleter,
//     every version of it) right before the delete marker, once nothing
//     else stops the Delete, and again when it removes the session's
//     objects (a copy put back meanwhile by nothing the Store does, but
//     removed however it came); then the local key record. A crash
//     between the key's destruction and the marker leaves a session
//     without its key: reads fail with a *KeyError, and a Delete
//     finishes it.
//
// Rewrap and Reencrypt rewrite key records and chunks in place on disk;
// with Options.Remote they return ErrRemoteUnsupported (docs/encryption.md).

// claimKeyObject puts key's record as session id's key object, for a
// Create with Options.Remote, and returns the key the session is to be
// sealed under: key, or the one of the record already there (adopted).
func (s *Store) claimKeyObject(ctx context.Context, id uuid.UUID, key *sessionKey) (*sessionKey, error) {
	b, err := seal.EncodeRecord(key.created)
	if err != nil {
		return nil, err
	}
	ok := seam.KeyObject(id)
	ctx, cancel := context.WithTimeout(ctx, s.opts.RemoteTimeout)
	defer cancel()
	err = s.opts.Remote.Create(ctx, ok, b)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, ErrObjectExists) {
		return nil, seam.RemoteErr("create", ok, err)
	}
	got, err := s.opts.Remote.Get(ctx, ok, 0, seal.MaxRecordSize+1)
	if err != nil {
		return nil, seam.RemoteErr("get", ok, err)
	}
	if bytes.Equal(got, b) {
		return key, nil // this Create's own, from a call that failed after it
	}
	rec, err := seal.DecodeRecord(ok, id, got)
	if err != nil {
		return nil, damage(err)
	}
	adopted, err := s.unwrapRecord(ctx, id, rec)
	if err != nil {
		return nil, err
	}
	adopted.created = rec
	return adopted, nil
}

// fetchKeyObject reads session id's key object into the local key record,
// for a Store that has none (encrypt.go's loadSessionKey), and returns the
// record. ErrObjectNotFound: the object store holds no key for it.
func (s *Store) fetchKeyObject(ctx context.Context, id uuid.UUID) (seal.Record, error) {
	ok := seam.KeyObject(id)
	ctx, cancel := context.WithTimeout(ctx, s.opts.RemoteTimeout)
	defer cancel()
	b, err := s.opts.Remote.Get(ctx, ok, 0, seal.MaxRecordSize+1)
	if errors.Is(err, ErrObjectNotFound) {
		return seal.Record{}, err
	}
	if err != nil {
		return seal.Record{}, seam.RemoteErr("get", ok, err)
	}
	rec, err := seal.DecodeRecord(ok, id, b)
	if err != nil {
		return seal.Record{}, damage(err)
	}
	// The local copy: written as Create writes it (keys/ made and
	// synced on first use), so that the key cache's stamp sees it.
	if _, err := s.writeKeyRecord(id, &sessionKey{created: rec}); err != nil {
		return seal.Record{}, err
	}
	return rec, nil
}

// destroyKeyObject removes session id's key object, every version of it
// when the ObjectStore can (ObjectVersionDeleter): crypto-shredding in the
// object store, the first step of a Delete with Options.Remote.
// A session the local copy of whose session.json says is plain has none:
// no call is made.
func (s *Store) destroyKeyObject(ctx context.Context, id uuid.UUID) error {
	if m, _, err := readMeta(s.opts.fs, s.sessionDir(id), id); err == nil && !m.Encrypted {
		return nil
	}
	ok := seam.KeyObject(id)
	if vd, is := s.opts.Remote.(ObjectVersionDeleter); is {
		if err := vd.DeleteAllVersions(ctx, ok); err != nil {
			return seam.RemoteErr("delete all versions", ok, err)
		}
		return nil
	}
	if err := s.opts.Remote.Delete(ctx, ok); err != nil {
		return seam.RemoteErr("delete", ok, err)
	}
	return nil
}
