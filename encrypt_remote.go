package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

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
//   - No root keeps a copy of the key record on disk (a copy would outlive
//     a Delete made on another root, beside that root's cached chunks): a
//     Store reads the key object when it first needs the session's key,
//     and keeps the key in memory (the key cache, encrypt.go; session ids
//     are never used again on object storage, so it needs no stamp).
//   - Delete destroys the key object (and, with an ObjectVersionDeleter,
//     every version of it) right before the delete marker, once nothing
//     else stops the Delete, and again when it removes the session's
//     objects (a copy put back meanwhile by nothing the Store does, but
//     removed however it came). A crash between the key's destruction
//     and the marker leaves a session without its key: reads fail with a
//     *KeyError, and a Delete finishes it.
//   - Create first asks whether the session exists in the object store
//     (ErrExists before any key object is touched). A Create of an id
//     that a Delete removed (ids are never used again) leaves its key
//     object behind when its log Create fails: it guards no data, and is
//     not removed (another Create may be adopting it).
//
//   - Rewrap replaces each key object with a conditional write
//     (rewrapRemote, ObjectReplacer): only the version it read, so that
//     it never brings back a key object a Delete destroyed meanwhile nor
//     replaces the key of a session made again under the id. Other Stores
//     keep the data key they hold, which a rewrap does not change.
//
// Reencrypt rewrites chunks in place on disk; with Options.Remote it
// returns ErrRemoteUnsupported, as Upgrade and ConvertCompression do
// (docs/encryption.md).

// claimRemoteKey is claimKeyObject for a Create, after a look at the
// object store: the key object of a session that exists there is not
// this Create's to adopt (ErrExists).
func (s *Store) claimRemoteKey(ctx context.Context, id uuid.UUID, key *sessionKey) (*sessionKey, error) {
	switch _, err := s.metaRemote(ctx, id); {
	case err == nil:
		return nil, fmt.Errorf("%w: session %s", ErrExists, id)
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("sessionstore: create session %s: %w", id, err)
	}
	k, err := s.claimKeyObject(ctx, id, key)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: create session %s: key record: %w", id, err)
	}
	return k, nil
}

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

// fetchKeyObject reads session id's key object (encrypt.go's
// loadSessionKey). ErrObjectNotFound: the object store holds no key for
// it.
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

// rewrapRemote is Rewrap with Options.Remote: every key object under
// seam.KeyPrefix rewrapped (rewrapKeyObject). It needs an ObjectReplacer.
func (s *Store) rewrapRemote(ctx context.Context) (RewrapReport, error) {
	var rep RewrapReport
	rp, ok := s.opts.Remote.(ObjectReplacer)
	if !ok {
		return rep, fmt.Errorf("%w: Rewrap needs an ObjectStore that replaces an object only if unchanged (ObjectReplacer)", ErrRemoteUnsupported)
	}
	objs, err := s.opts.Remote.List(ctx, seam.KeyPrefix, 0)
	if err != nil {
		return rep, seam.RemoteErr("list", seam.KeyPrefix, err)
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		id, err := uuid.Parse(strings.TrimSuffix(strings.TrimPrefix(o.Key, seam.KeyPrefix), ".json"))
		if err != nil || seam.KeyObject(id) != o.Key {
			continue // not a key object this package writes
		}
		done, err := s.rewrapKeyObject(ctx, rp, id)
		rep.add(id, done, err)
	}
	return rep, nil
}

// rewrapRetries bounds how many times rewrapKeyObject reads a key object
// again that changed under it.
const rewrapRetries = 4

// rewrapKeyObject replaces session id's key object by one whose data
// keys are all wrapped under the provider's current key, with rp's
// conditional write: if the object changed since it was read (a Delete
// destroyed it, a Create of the id put another, another Rewrap replaced
// it), it is read again; if it is gone, nothing is written. It reports
// whether it replaced the object.
func (s *Store) rewrapKeyObject(ctx context.Context, rp ObjectReplacer, id uuid.UUID) (bool, error) {
	key := seam.KeyObject(id)
	for range rewrapRetries {
		b, tag, err := rp.GetTagged(ctx, key)
		if errors.Is(err, ErrObjectNotFound) {
			return false, nil // deleted meanwhile
		}
		if err != nil {
			return false, seam.RemoteErr("get", key, err)
		}
		if tag == "" {
			// No version to replace conditionally: an empty If-Match
			// would not guard the write.
			return false, seam.RemoteErr("get", key, errors.New("the object store gave no tag for the object"))
		}
		rec, err := seal.DecodeRecord(key, id, b)
		if err != nil {
			return false, damage(err)
		}
		changed, err := s.rewrapRecord(ctx, id, &rec)
		if err != nil || !changed {
			return false, err
		}
		nb, err := seal.EncodeRecord(rec)
		if err != nil {
			return false, err
		}
		err = rp.ReplaceIf(ctx, key, nb, tag)
		if errors.Is(err, ErrObjectChanged) {
			continue // read it again: gone, or another record
		}
		if err != nil {
			return false, seam.RemoteErr("replace", key, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("sessionstore: rewrap key object %s: it changed %d times while being rewrapped", key, rewrapRetries)
}
