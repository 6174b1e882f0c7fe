// Package workspace holds what the store's workspace snapshots need of a
// directory tree, apart from the store: the rules for a path a snapshot
// may hold (CheckPath), ignore rules in the form of .gitignore (Rules),
// the scan of a directory (Scan) and the writing of files into one
// (Writer).
//
// Contract:
//   - Every path it returns or accepts is relative, slash-separated,
//     clean, valid UTF-8, with no "." or ".." element and no NUL
//     (CheckPath); it never names anything outside the directory given.
//   - Scan and Writer go through a vfs.FS confined to the directory
//     (vfs.Confine): no symbolic link below it is followed. Scan reports
//     a link, a device or any file that is not regular or a directory
//     as skipped and never opens it; it walks with an explicit stack,
//     not recursion, and stops with an error at its limits (files, path
//     length), so a hostile tree costs bounded memory.
//   - Writer replaces a file by writing a temporary file beside it and
//     renaming it over the old one: after a crash each file is the old
//     one or the new one, never a mix; with Sync it syncs each file
//     before its rename and each directory it changed at the end.
//
// It imports internal/vfs and internal/parallel only.
package workspace
