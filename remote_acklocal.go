package sessionstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// recoverTail stores, in the background, what a session acknowledging
// after the local sync (DurableLocal) acknowledged and could not store:
// one of its Creates failed (seam.LogWriter.OnLost), and the session's
// lease can no more write. It closes the session here (its release fails)
// and opens it again, as the session's next call would: the open keeps
// the acknowledged records past the log and stores them first
// (storeTail). It tries again, every while up to 5 s, while the object
// store cannot be reached, until the open succeeds, another Store holds
// or took the session, the session is gone, or this Store closes; what
// is left then is stored by the next open of the session in this
// directory. So a healthy Store whose object store failed a moment loses
// nothing acknowledged, though no call of the session comes.
func (s *Store) recoverTail(id uuid.UUID) {
	if _, busy := s.recovering.LoadOrStore(id, true); busy {
		return
	}
	go func() {
		defer s.recovering.Delete(id)
		wait := 20 * time.Millisecond
		for !s.closed.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.RemoteTimeout)
			_ = s.CloseSession(ctx, id) // its release fails: the lease is lost
			_, err := s.Head(ctx, id)
			cancel()
			switch {
			case err == nil:
				return
			case errors.Is(err, ErrClosed), errors.Is(err, ErrNotFound), errors.Is(err, ErrFenced), errors.Is(err, ErrLocked):
				return
			}
			s.opts.Logger.Warn("sessionstore: storing the events acknowledged after the local sync failed; trying again", "session", id, "err", err)
			time.Sleep(wait)
			wait = min(2*wait, 5*time.Second)
		}
	}()
}
