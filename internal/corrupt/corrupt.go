// Package corrupt is how the packages below the root report damage in
// stored data: a file whose content is complete but invalid, at an
// offset. The root package turns an *Error into its public
// *CorruptionError (with the same path, offset and cause) where it
// receives one, so callers of the store see one type of damage whatever
// layer found it.
//
// The package holds a type: it reads and writes nothing.
package corrupt

import "fmt"

// Error reports stored data that is complete but invalid.
type Error struct {
	Path   string // file holding the bad data
	Offset int64  // byte offset of the bad record or line in Path
	Err    error  // what is wrong
}

// Error formats the error as "corrupt data in <path> at offset <n>:
// <cause>".
func (e *Error) Error() string {
	return fmt.Sprintf("corrupt data in %s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error at path and offset, its cause formatted as
// fmt.Errorf does.
func Errorf(path string, offset int64, format string, args ...any) error {
	return &Error{Path: path, Offset: offset, Err: fmt.Errorf(format, args...)}
}
