/* sha256.h: SHA-256 of a file or a buffer, as lowercase hex (OpenSSL libcrypto's EVP API): the
 * content hash run.json records for every input (inputs[].sha256) and the report checks a
 * trace file against (docs/outputs.md, docs/semantics.md). */
#ifndef FP8LAB_IO_SHA256_H
#define FP8LAB_IO_SHA256_H

#include <stdatomic.h>
#include <stddef.h>

/** Bytes of a SHA-256 in lowercase hex with its NUL: 64 digits, as sha256sum prints them. */
#define FP8_SHA256_HEX 65

/** What stat says of a file, enough to tell that it was replaced (another inode: a re-import
 *  swaps the trace folder) or rewritten (size, modification time), as git's index does. */
typedef struct {
  unsigned long long dev, ino;
  long long size, mtime_sec, mtime_nsec;
  int set; /* 0: stat failed (the hash then says why it cannot read) */
} fp8_file_id;

/** stat(path) into id (id->set 0 when stat fails). */
void fp8_file_id_of(const char *path, fp8_file_id *id);

/** SHA-256 of the regular file at path into hex (64 lowercase digits and a NUL). The file is
 *  opened without blocking and checked (a FIFO, device or socket is FP8_EFORMAT, "<path>: not a
 *  regular file"), then read to its end in 1 MiB reads. stop (NULL: none) is polled between
 *  reads: when it is set the hash ends early with FP8_EINVAL ("<path>: stopped"). want (NULL,
 *  or not set: no check): the file as the run found it; the open file must be that one, before
 *  and after the reading, else FP8_EIO ("<path>: changed while the run used it ..."), so the
 *  hash is of the bytes the run used. FP8_OK; FP8_EIO ("<path>: cannot read: <reason>");
 *  FP8_ENOMEM. */
int fp8_sha256_file(const char *path, const atomic_int *stop, const fp8_file_id *want,
                    char hex[FP8_SHA256_HEX], char *err, size_t errlen);

/** SHA-256 of n bytes at data into hex (64 lowercase digits and a NUL). FP8_OK, or FP8_ENOMEM
 *  when libcrypto cannot make its context. */
int fp8_sha256_mem(const void *data, size_t n, char hex[FP8_SHA256_HEX]);

#endif
