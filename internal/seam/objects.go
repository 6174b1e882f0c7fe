package seam

import (
	"errors"
	"fmt"
)

// The errors of an object store and of the sessions kept in one. The
// root package's public errors of the same names are these values, so
// that an ObjectStore's errors and the seam's match them.
var (
	ErrObjectExists   = errors.New("sessionstore: object exists")
	ErrObjectNotFound = errors.New("sessionstore: object not found")
	ErrRemote         = errors.New("sessionstore: object store call failed")
	ErrFenced         = errors.New("sessionstore: session taken over by another writer")
)

// RemoteErr wraps the failed object store call op on key: the error
// matches ErrRemote and err.
func RemoteErr(op, key string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrRemote, op, key, err)
}
