/*
 * rundir.c — creating the run directory safely (docs/limits.md, "Run
 * directory"). Once the directory is ours and 0700, nobody else can create,
 * replace or symlink a file inside it, so the files in it can be opened by
 * name. The check is on the directory itself, after mkdir, with lstat: a
 * symlink planted under the predictable name is refused, not followed.
 */
#include "rundir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

int p3d_rundir_make(const char *path, char **err)
{
    struct stat st;
    char *slash = strrchr(path, '/');
    if (slash && slash != path) { /* parents as before; the last part is checked */
        char *parent = strndup(path, (size_t)(slash - path));
        if (!parent)
            return p3d_err(err, "out of memory");
        int r = p3d_mkdir_p(parent, 0700);
        int e = errno;
        free(parent);
        if (r < 0)
            return p3d_err(err, "--run-dir %s: cannot create its parent: %s", path, strerror(e));
    }
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return p3d_err(err, "--run-dir %s: cannot create it: %s", path, strerror(errno));
    if (lstat(path, &st) < 0)
        return p3d_err(err, "--run-dir %s: %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return p3d_err(err, "--run-dir %s: is a symbolic link; refusing it (another user may have planted it: "
                            "remove it, or choose another --run-dir)", path);
    if (!S_ISDIR(st.st_mode))
        return p3d_err(err, "--run-dir %s: exists and is not a directory", path);
    if (st.st_uid != geteuid())
        return p3d_err(err, "--run-dir %s: belongs to uid %u, not to you (uid %u); refusing it (another user may "
                            "have created it to swap files in it: remove it, or choose another --run-dir)",
                       path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 077)
        return p3d_err(err, "--run-dir %s: has mode %04o, expected 0700 (others could add or replace files in "
                            "it); chmod 700 it or choose another --run-dir",
                       path, (unsigned)(st.st_mode & 07777));
    return 0;
}
