// Package secret reads secrets mounted as files (a Kubernetes Secret volume, a Docker secret, a file a
// sidecar rewrites) and reads them again when they change, so that a rotated password, client secret,
// token or certificate is used without a restart.
//
// A File holds a path. Each use asks whether the file changed: it resolves the path's symbolic links (a
// Kubernetes Secret volume swaps its ..data link to a new directory on every update) and compares the
// target, its inode, size and modification time with those of the last read, a few system calls. Only a
// change reads the file again (and a file modified within two seconds of its last read, whose change could
// hide in one tick of the file system's clock). A file that cannot be read, or is empty, is an error naming
// the setting and the path; it is not remembered, so the next use tries again.
//
// Concurrency: a File is safe for concurrent use; reads of one File are serialized by its mutex, which is
// never held across anything slower than a stat and a read of a small local file.
package secret
