// SPDX-License-Identifier: GPL-2.0
/*
 * zeropin-libvirt-hook - the fast path of zeropin's libvirt hook.
 *
 * libvirt runs every program in /etc/libvirt/hooks/qemu.d for every
 * domain, several times per start, and a start waits for each. The hook
 * there (scripts/libvirt/qemu.d/zeropin, a bash script) names this
 * program as its interpreter (#!PREFIX/lib/zeropin/zeropin-libvirt-hook),
 * so the kernel runs it as
 *
 *	zeropin-libvirt-hook SCRIPT DOMAIN OPERATION SUB-OPERATION EXTRA
 *
 * with the domain XML on stdin. It does the common cases itself: every
 * operation but prepare, started and release (nothing to do), `started
 * begin`, the prepare of a domain that is not zeropin's (its XML read,
 * nothing else), and the prepare of a zeropin domain in a configuration
 * it reads exactly as the script does. Everything else (release, a
 * refusal, a configuration error, anything it does not recognise, a step
 * that fails) it hands to the script, which stays the reference: bash
 * runs SCRIPT with the same arguments and the XML on stdin. The script
 * redoes the prepare from the start; every step here is one it repeats
 * harmlessly (the domain's reservation rewritten, folders made again).
 *
 * Why: under the lab's nested TCG, bash's start and the script's forks
 * (stat, flock, mkdir, chown, ln) cost ~2.3 s per start of a zeropin
 * domain and ~0.3 s for any other; this program costs a few ms (issue
 * 38: no start-time work of zeropin's own beyond a stock start's).
 *
 * Settings, files and messages are the script's: see its --help and
 * scripts/lib/host.sh. The environment overrides the script honours for
 * tests (ZP_CONF, ZP_SYSFS, ZP_HOOK_STATE, ZP_LIBVIRT_RUN, ZP_APPARMOR_D,
 * ZP_SECURITYFS, ZEROPIN_*) are honoured here too; libvirt runs hooks
 * with a clean environment.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define ZEROPINFS_MAGIC 0x7a70696eL	/* statfs f_type, kernel/zfs.h */
#define PROG "zeropin hook"
#define BASH "/bin/bash"
#define DEFAULT_BACKING_DIR "/var/lib/libvirt/qemu/ram"	/* libvirt's */
#define DEFAULT_QEMU_ID "libvirt-qemu"	/* Debian's QEMU user and group */
#define DOMAINS_DIR "domains"		/* MOUNT/domains/libvirt-UUID */
#define LOCK_PATH "/run/zeropin-hook.lock"
#define LOCK_WAIT_MS 10000	/* the script's flock -w 10 */
#define STALE_S 120		/* the script's STALE_S */
#define POOL_POLL_MS 200	/* the script's sleep 0.2 */
#define SHORT_NAME 20		/* libvirt's short domain name, characters */
#define CONF_BUF 65536		/* stdio buffer for qemu.conf: Debian's is ~40 KiB */

/* The hook's arguments and what it read: one domain, one call. */
struct hook {
	char **argv;			/* SCRIPT DOMAIN OPERATION SUB-OPERATION ... */
	const char *domain;		/* libvirt's name for the domain */
	char *xml;			/* the domain XML from stdin (NUL-terminated) */
	size_t xml_len;			/* its length in bytes */
	const char *tail;		/* the XML past the last </metadata>: libvirt's */
	char id[24];			/* libvirt's id for the domain, or "" */
	char uuid[40];			/* its <uuid>, or "" */
	unsigned long long ram_mib;	/* <memory>, MiB rounded up */
	uid_t uid;			/* QEMU's user (qemu.conf's user) */
	gid_t gid;			/* QEMU's group (qemu.conf's group) */
};

/* zeropin.conf's settings the fast path uses (host.sh: zp_conf_defaults). */
struct conf {
	char mount[PATH_MAX];		/* ZEROPIN_MOUNT */
	char qemu_conf[PATH_MAX];	/* ZEROPIN_QEMU_CONF */
	long wait_s;			/* ZEROPIN_HOOK_WAIT_S */
	int allow_unconfined;		/* ZEROPIN_ALLOW_UNCONFINED */
};

/* qemu.conf's settings the hook reads (host.sh: zp_qemu_conf_read). */
enum { QC_BACKING, QC_USER, QC_GROUP, QC_HUGETLBFS, QC_SECDRIVER, QC_N };
static const char *const qc_keys[QC_N] = {
	"memory_backing_dir", "user", "group", "hugetlbfs_mount", "security_driver",
};

static struct hook H;
static struct conf C;
static char QC[QC_N][PATH_MAX];		/* each key's value, "" when unset */
static char backing_dir[PATH_MAX];	/* memory_backing_dir or libvirt's default */

/* --- the script takes over --- */

/*
 * Run the script in this process's place: bash SCRIPT with the hook's
 * arguments, the XML read so far (if any) on stdin again from a memfd.
 * Called for everything the fast path does not do; never returns.
 * Holds no lock: every fd but stdin/stdout/stderr is close-on-exec.
 * Under libvirtd's AppArmor profile (this program runs in it: the hook's
 * path is "/etc/libvirt/hooks/(all) rmix") bash is "/usr/bin/(any) PUx", so the
 * script runs unconfined here, where the kernel ran it in libvirtd's
 * profile before; it needs nothing that profile denies, and root's hook
 * gains nothing a tenant could use. ZP_HOOK_NO_SCRIPT (tests) makes this
 * exit 99 instead: the fast path did not do the whole call.
 */
static void __attribute__((noreturn)) to_script(void)
{
	int argc = 0, fd;
	char **args;

	if (getenv("ZP_HOOK_NO_SCRIPT")) {
		fprintf(stderr, PROG ": the fast path hands this call to the script (ZP_HOOK_NO_SCRIPT is set)\n");
		exit(99);
	}

	while (H.argv[argc])
		argc++;
	args = calloc(argc + 2, sizeof(*args));
	if (!args)
		exit(1);
	args[0] = BASH;
	memcpy(&args[1], H.argv, argc * sizeof(*args));
	if (H.xml) {
		fd = memfd_create("zeropin-hook-xml", 0);
		if (fd < 0 || write(fd, H.xml, H.xml_len) != (ssize_t)H.xml_len ||
		    lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) != 0) {
			fprintf(stderr, PROG ": error: cannot hand the domain XML to %s: %m\n", H.argv[0]);
			exit(1);
		}
		close(fd);
	}
	execv(BASH, args);
	fprintf(stderr, PROG ": error: cannot run %s %s: %m\n", BASH, H.argv[0]);
	exit(1);
}

/* Say it on stderr and in syslog, as the script's warn() does. */
static void __attribute__((format(printf, 1, 2))) warn(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": warning: %s\n", msg);
	openlog("zeropin-hook", 0, LOG_DAEMON);
	syslog(LOG_WARNING, "%s", msg);
	closelog();
}

/* --- small helpers --- */

#define SPACE " \t\n\v\f\r"	/* [[:space:]] in the C locale */
#define DIGITS "0123456789"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define ALPHA UPPER "abcdefghijklmnopqrstuvwxyz"
#define ALNUM ALPHA DIGITS

/*
 * The script's patterns (bash's =~, POSIX ERE) are plain scans here, each
 * comment naming the pattern it stands for: glibc's regcomp and regexec
 * were 4.3 of 5.4 million instructions of a zeropin prepare (valgrind),
 * milliseconds of every VM start under nested TCG.
 */

/* Is S made only of SET's characters, at least MIN of them? */
static bool all_in(const char *s, const char *set, size_t min)
{
	size_t n = strspn(s, set);

	return !s[n] && n >= min;
}

/* ^(0|[1-9][0-9]*)$, or with EMPTY_OK ^(0|[1-9][0-9]*)?$ */
static bool decimal(const char *s, bool empty_ok)
{
	if (!*s)
		return empty_ok;
	return all_in(s, DIGITS, 1) && (s[0] != '0' || !s[1]);
}

/* Does P start with NAME['"]VALUE['"]? */
static bool quoted_at(const char *p, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);

	if (strncmp(p, name, n))
		return false;
	p += n;
	return (*p == '\'' || *p == '"') && !strncmp(p + 1, value, v) && (p[1 + v] == '\'' || p[1 + v] == '"');
}

/* Does TEXT hold NAME['"]VALUE['"] anywhere? */
static bool quoted_after(const char *text, const char *name, const char *value)
{
	for (; (text = strstr(text, name)); text++)
		if (quoted_at(text, name, value))
			return true;
	return false;
}

/* A path from a format; false when it does not fit PATH_MAX. */
static bool pathf(char *buf, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_MAX, fmt, ap);
	va_end(ap);
	return n > 0 && n < PATH_MAX;
}

/* A whole (small) file, NUL-terminated, or NULL. The caller frees it. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	return buf;
}

/* The first field of a file's first line as an unsigned number (a
 * sysfs value, a reservation's "MiB ID"); false if it is none. */
static bool read_number(const char *path, unsigned long long *val)
{
	char line[128], *end;
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(line, sizeof(line), f) && isdigit((unsigned char)line[0]);
	fclose(f);
	if (ok) {
		errno = 0;
		*val = strtoull(line, &end, 10);
		ok = !errno && (*end == '\0' || isspace((unsigned char)*end));
	}
	return ok;
}

static bool write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	size_t len = strlen(text);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, text, len) == (ssize_t)len;
	return close(fd) == 0 && ok;
}

static bool exists(const char *path)	/* the shell's [ -e ]: follows links */
{
	struct stat st;

	return stat(path, &st) == 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

#define RM_DEPTH 8	/* folders the hook removes hold files, not trees */

/*
 * Remove NAME in the folder AT and everything in it, links not
 * followed, each step relative to a folder's fd: no path that a writer
 * racing the hook could redirect (libvirt's folder for the domain is
 * QEMU's user's).
 */
static bool rm_tree_at(int at, const char *name, int depth)
{
	struct dirent *de;
	struct stat st;
	bool ok = true;
	DIR *d;
	int fd;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT;
	if (!S_ISDIR(st.st_mode))
		return !unlinkat(at, name, 0) || errno == ENOENT;
	if (depth > RM_DEPTH)
		return false;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ok = rm_tree_at(dirfd(d), de->d_name, depth + 1) && ok;
	closedir(d);
	return ok && (!unlinkat(at, name, AT_REMOVEDIR) || errno == ENOENT);
}

/* rm -rf PATH (its parent resolved as a path: a folder of root's). */
static bool rm_rf(const char *path)
{
	char parent[PATH_MAX];
	const char *base = strrchr(path, '/');
	bool ok;
	int fd;

	if (!base || !base[1] || !pathf(parent, "%.*s", (int)(base - path), path))
		return false;
	fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	ok = rm_tree_at(fd, base + 1, 0);
	close(fd);
	return ok;
}

/* mkdir -p: each missing parent made with the default mode, the last
 * with MODE (umask applied: the caller sets it exactly); *CREATED says
 * whether the last was made. The last must be a folder, not a link. */
static bool mkdir_p(const char *path, mode_t mode, bool *created)
{
	char buf[PATH_MAX], *p;
	struct stat st;
	int err;

	*created = false;
	if (!pathf(buf, "%s", path))
		return false;
	/* the folder, or its parent, is there after the first start: one
	 * mkdir then, the components only when a parent is missing (system
	 * calls cost under TCG) */
	err = mkdir(buf, mode) ? errno : 0;
	if (err == ENOENT) {
		for (p = buf + 1; (p = strchr(p, '/')); p++) {
			*p = '\0';
			if (mkdir(buf, 0777) && errno != EEXIST)
				return false;
			*p = '/';
		}
		err = mkdir(buf, mode) ? errno : 0;
	}
	if (!err)
		*created = true;
	else if (err != EEXIST)
		return false;
	return !lstat(buf, &st) && S_ISDIR(st.st_mode);
}

/* The folder PATH, not a link, opened for fchmod/fchown; -1 if not. */
static int open_folder_at(int dirfd, const char *path)
{
	return openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* --- the configuration --- */

static const char *const conf_keys[] = {
	"ZEROPIN_MOUNT", "ZEROPIN_MOUNT_SIZE", "ZEROPIN_MOUNT_MODE", "ZEROPIN_POOL_MIB",
	"ZEROPIN_RUN_BUILD", "ZEROPIN_MODULE", "ZEROPIN_DEVICES", "ZEROPIN_HOOK_WAIT_S",
	"ZEROPIN_QEMU_CONF", "ZEROPIN_ALLOW_UNCONFINED", NULL,
};

/* Each key's value: the defaults, the file, the environment (host.sh). */
static char conf_val[10][PATH_MAX];

static int conf_index(const char *key)
{
	int i;

	for (i = 0; conf_keys[i]; i++)
		if (!strcmp(conf_keys[i], key))
			return i;
	return -1;
}

/* One KEY=VALUE line of the file, as zp_conf_load() reads it; false for
 * what it would call an error. */
static bool conf_line(char *line)
{
	char key[64], *val, *end;
	size_t n;
	int i;

	line[strcspn(line, "#\n")] = '\0';
	if (all_in(line, SPACE, 0))
		return true;
	/* ^[[:space:]]*([A-Z0-9_]+)=(.*)$ */
	line += strspn(line, SPACE);
	n = strspn(line, UPPER "_" DIGITS);
	if (!n || line[n] != '=' || n >= sizeof(key))
		return false;
	memcpy(key, line, n);
	key[n] = '\0';
	i = conf_index(key);
	if (i < 0)
		return false;
	val = line + n + 1;
	end = val + strlen(val);
	while (end > val && isspace((unsigned char)end[-1]))
		*--end = '\0';
	if (*val == '"')
		val++;
	end = val + strlen(val);
	if (end > val && end[-1] == '"')
		end[-1] = '\0';
	return (size_t)snprintf(conf_val[i], PATH_MAX, "%s", val) < PATH_MAX;
}

/* The values zp_conf_check() accepts; anything else is the script's to
 * report. */
static bool conf_valid(void)
{
	static const char *const system_dirs[] = {
		"/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/media", "/mnt",
		"/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
		"/var", "/var/lib", "/var/lib/libvirt", "/var/lib/libvirt/qemu", "/run/libvirt", NULL,
	};
	const char *mnt = conf_val[conf_index("ZEROPIN_MOUNT")];
	const char *unconfined = conf_val[conf_index("ZEROPIN_ALLOW_UNCONFINED")];
	const char *run_build = conf_val[conf_index("ZEROPIN_RUN_BUILD")];
	const char *mode = conf_val[conf_index("ZEROPIN_MOUNT_MODE")];
	const char *p;
	int i;

	if (!decimal(conf_val[conf_index("ZEROPIN_HOOK_WAIT_S")], false) ||
	    !decimal(conf_val[conf_index("ZEROPIN_POOL_MIB")], true) ||
	    !all_in(unconfined, "01", 1) || unconfined[1] ||		/* ^[01]$ */
	    !all_in(run_build, "01", 0) || strlen(run_build) > 1 ||	/* ^[01]?$ */
	    !all_in(mode, "01234567", 3) || strlen(mode) > 4 ||		/* ^[0-7]{3,4}$ */
	    strlen(conf_val[conf_index("ZEROPIN_HOOK_WAIT_S")]) > 6)
		return false;
	/* ^(/[A-Za-z0-9_,+@:-][A-Za-z0-9_.,+@:-]*)+$: each / starts a name
	 * that does not start with a dot (so no /./ or /../ either) */
	if (*mnt != '/' || !all_in(mnt, ALNUM "_.,+@:-/", 1))
		return false;
	for (p = mnt; (p = strchr(p, '/')); p++)
		if (!p[1] || !strchr(ALNUM "_,+@:-", p[1]))
			return false;
	for (i = 0; system_dirs[i]; i++)
		if (!strcmp(mnt, system_dirs[i]))
			return false;
	return true;
}

/* zp_conf_load(): false for anything the script would refuse or warn of. */
static bool conf_load(void)
{
	const char *path = getenv("ZP_CONF"), *env;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	bool ok = true;
	FILE *f;
	int i;

	snprintf(conf_val[conf_index("ZEROPIN_MOUNT")], PATH_MAX, "/run/zeropin");
	snprintf(conf_val[conf_index("ZEROPIN_MOUNT_MODE")], PATH_MAX, "0711");
	snprintf(conf_val[conf_index("ZEROPIN_HOOK_WAIT_S")], PATH_MAX, "1");
	snprintf(conf_val[conf_index("ZEROPIN_QEMU_CONF")], PATH_MAX, "/etc/libvirt/qemu.conf");
	snprintf(conf_val[conf_index("ZEROPIN_ALLOW_UNCONFINED")], PATH_MAX, "0");
	f = fopen(path && *path ? path : "/etc/zeropin/zeropin.conf", "re");
	if (f) {
		while (ok && (len = getline(&line, &cap, f)) >= 0)
			ok = (size_t)len == strlen(line) && conf_line(line);	/* a NUL: the script's */
		free(line);
		fclose(f);
	} else if (errno != ENOENT) {
		return false;
	}
	for (i = 0; ok && conf_keys[i]; i++) {
		env = getenv(conf_keys[i]);
		if (env && (size_t)snprintf(conf_val[i], PATH_MAX, "%s", env) >= PATH_MAX)
			ok = false;
	}
	if (!ok || !conf_valid())
		return false;
	snprintf(C.mount, sizeof(C.mount), "%s", conf_val[conf_index("ZEROPIN_MOUNT")]);
	snprintf(C.qemu_conf, sizeof(C.qemu_conf), "%s", conf_val[conf_index("ZEROPIN_QEMU_CONF")]);
	C.wait_s = atol(conf_val[conf_index("ZEROPIN_HOOK_WAIT_S")]);
	C.allow_unconfined = conf_val[conf_index("ZEROPIN_ALLOW_UNCONFINED")][0] == '1';
	return true;
}

/* One qemu.conf line's value as zp_qemu_conf_read() reads it: quoted
 * strings ("a" or 'a', or a one-line list of them) joined by spaces. */
static void qc_value(const char *rest, char *out)
{
	const char *close;
	size_t used = 0, len;

	out[0] = '\0';
	for (;;) {
		/* ^[[:space:],[]*("([^"]*)"|'([^']*)')(.*)$ */
		rest += strspn(rest, SPACE ",[");
		if ((*rest != '"' && *rest != '\'') || !(close = strchr(rest + 1, *rest)))
			break;
		len = close - rest - 1;
		if (used + len + 2 >= PATH_MAX)
			break;
		if (used)
			out[used++] = ' ';
		memcpy(out + used, rest + 1, len);
		out[used += len] = '\0';
		rest = close + 1;
		rest += strspn(rest, SPACE);	/* ^[[:space:]]*, */
		if (*rest != ',')
			break;
	}
}

/* Each key's first line KEY = VALUE, in one pass, as libvirt reads them;
 * false on a NUL in a line (bash's read drops it: the script's to read). */
static bool qemu_conf_read(void)
{
	static char conf_buf[CONF_BUF];
	char *line = NULL;
	const char *key, *p;
	bool seen[QC_N] = { 0 }, ok = true;
	size_t cap = 0;
	ssize_t len;
	int k, left = QC_N;
	FILE *f = fopen(C.qemu_conf, "re");

	memset(QC, 0, sizeof(QC));
	if (!f)
		return true;
	setvbuf(f, conf_buf, _IOFBF, sizeof(conf_buf));	/* Debian's qemu.conf in one read */
	while (ok && left && (len = getline(&line, &cap, f)) >= 0) {
		ok = (size_t)len == strlen(line);
		/* ^[[:space:]]*KEY[[:space:]]*=[[:space:]]*(.*)$ */
		line[strcspn(line, "\n")] = '\0';
		key = line + strspn(line, SPACE);
		if (*key < 'a' || *key > 'z')	/* comments, most lines */
			continue;
		for (k = 0; k < QC_N; k++) {
			if (seen[k] || strncmp(key, qc_keys[k], strlen(qc_keys[k])))
				continue;
			p = key + strlen(qc_keys[k]);
			p += strspn(p, SPACE);
			if (*p != '=')
				continue;
			seen[k] = true;
			left--;
			qc_value(p + 1 + strspn(p + 1, SPACE), QC[k]);
		}
	}
	free(line);
	fclose(f);
	return ok;
}

/*
 * NAME's id in FILE (/etc/passwd or /etc/group: "name:x:ID:..."). The
 * program is linked statically (a dynamic start costs ~45 ms more under
 * nested TCG, in every VM start), so it reads the files itself, without
 * NSS: a user or group found only elsewhere (LDAP, systemd's dynamic
 * users) is the script's to resolve.
 */
static bool etc_id(const char *file, const char *name, unsigned int *id)
{
	size_t len = strlen(name), cap = 0;
	char *line = NULL, *p, *end;
	bool found = false;
	FILE *f = fopen(file, "re");

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) >= 0) {
		if (strncmp(line, name, len) || line[len] != ':' || !(p = strchr(line + len + 1, ':')))
			continue;
		errno = 0;
		*id = strtoul(p + 1, &end, 10);
		found = !errno && end != p + 1 && *end == ':';
	}
	free(line);
	fclose(f);
	return found;
}

/* QEMU's user or group by name, +N or N (chown(1)'s rules). */
static bool qemu_id(const char *name, bool group, unsigned int *id)
{
	const char *file = group ? "/etc/group" : "/etc/passwd";
	char *end;

	if (*name != '+' && etc_id(file, name, id))
		return true;
	if (*name == '+' || isdigit((unsigned char)*name)) {
		errno = 0;
		*id = strtoul(name + (*name == '+'), &end, 10);
		return !errno && !*end && end != name + (*name == '+');
	}
	return false;
}

/* --- the domain XML --- */

static void read_xml(void)
{
	size_t cap = 65536;
	ssize_t n;

	H.xml = malloc(cap);
	if (!H.xml)
		exit(1);
	for (;;) {
		if (H.xml_len + 1 >= cap) {
			cap *= 2;
			H.xml = realloc(H.xml, cap);
			if (!H.xml)
				exit(1);
		}
		n = read(0, H.xml + H.xml_len, cap - 1 - H.xml_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		H.xml_len += n;
	}
	H.xml[H.xml_len] = '\0';
	if (strlen(H.xml) != H.xml_len)	/* a NUL inside: the script's to judge */
		to_script();
	H.tail = H.xml;
	for (const char *p = H.xml; (p = strstr(p, "</metadata>")); p++)
		H.tail = p + strlen("</metadata>");
}

/* The script's read_ram() for the XML libvirt writes (anything else goes
 * through xmllint: the script's); zp_to_mib()'s units and bounds. */
static bool read_ram(void)
{
	static const struct { const char *unit; unsigned long long mult; } units[] = {
		{ "b", 1 }, { "bytes", 1 }, { "KB", 1000ULL }, { "k", 1024ULL }, { "KiB", 1024ULL },
		{ "MB", 1000000ULL }, { "M", 1048576ULL }, { "MiB", 1048576ULL },
		{ "GB", 1000000000ULL }, { "G", 1073741824ULL }, { "GiB", 1073741824ULL },
		{ "TB", 1000000000000ULL }, { "T", 1099511627776ULL }, { "TiB", 1099511627776ULL },
	};
	const char *end = H.xml + H.xml_len, *p, *q = NULL, *a = NULL;
	char unit[16], amount[24];
	unsigned long long n, mult = 0;
	size_t i, u = 0, d = 0;

	/* </domain>[[:space:]]*$ */
	while (end > H.xml && isspace((unsigned char)end[-1]))
		end--;
	if (end - H.xml < 9 || strncmp(end - 9, "</domain>", 9))
		return false;
	/* the first <memory unit='([A-Za-z]+)'>([0-9]+)</memory> */
	for (p = H.tail; (p = strstr(p, "<memory unit='")); p++, q = NULL) {
		q = p + strlen("<memory unit='");
		u = strspn(q, ALPHA);
		if (!u || strncmp(q + u, "'>", 2))
			continue;	/* nothing read past the unit's end */
		a = q + u + 2;
		d = strspn(a, DIGITS);
		if (d && !strncmp(a + d, "</memory>", 9))
			break;
	}
	if (!q || u >= sizeof(unit) || d > 18)	/* the script's ^[0-9]{1,18}$ */
		return false;
	memcpy(unit, q, u);
	unit[u] = '\0';
	memcpy(amount, a, d);
	amount[d] = '\0';
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(unit, units[i].unit))
			mult = units[i].mult;
	n = strtoull(amount, NULL, 10);
	if (!mult || n > 0x7fffffffffffffffULL / mult)
		return false;
	H.ram_mib = (n * mult + 1048575) / 1048576;
	return H.ram_mib > 0;
}

/*
 * Each <seclabel> tag past <metadata> (libvirt's), as the script's
 * <seclabel([^>]*)> or, with SPACE_FIRST, <seclabel([[:space:]][^>]*)>
 * finds them: its attributes (the group) to OK in turn. False when OK
 * says no to one, or one is too long to judge (the script's to do then).
 */
static bool seclabels_all(bool space_first, bool (*ok)(const char *attrs))
{
	const char *p = H.tail, *gt;
	char attrs[512];

	while ((p = strstr(p, "<seclabel"))) {
		p += strlen("<seclabel");
		if (space_first && !isspace((unsigned char)*p))
			continue;
		gt = strchr(p, '>');
		if (!gt)
			break;
		if ((size_t)(gt - p) >= sizeof(attrs))
			return false;
		memcpy(attrs, p, gt - p);
		attrs[gt - p] = '\0';
		if (!ok(attrs))
			return false;
		p = gt + 1;
	}
	return true;
}

static bool not_unconfined(const char *attrs)
{
	return !quoted_after(attrs, "type=", "none") || quoted_after(attrs, "model=", "dac");
}

/* The script's check_confined(): any <seclabel type='none'> not of the
 * dac model is the script's to refuse (or let through, as configured). */
static bool confined(void)
{
	return seclabels_all(true, not_unconfined);
}

/* libvirt's id (<domain ... id='N'>) and <uuid>, each "" when absent. */
static void domain_id_uuid(void)
{
	const char *p, *gt = strchr(H.xml, '>'), *v, *id = NULL;
	size_t n, id_len = 0;

	/* ^[^>]*[[:space:]]id=['"]([0-9]+)['"]: the first tag's last id= */
	for (p = H.xml; gt && (p = strstr(p, "id=")) && p < gt; p++) {
		v = p + 3;
		if (p == H.xml || !isspace((unsigned char)p[-1]) || (*v != '\'' && *v != '"'))
			continue;
		n = strspn(v + 1, DIGITS);
		if (n && (v[1 + n] == '\'' || v[1 + n] == '"'))
			id = v + 1, id_len = n;
	}
	if (id && id_len < sizeof(H.id)) {
		memcpy(H.id, id, id_len);
		H.id[id_len] = '\0';
	}
	for (p = H.xml; (p = strstr(p, "<uuid>")); p++) {	/* <uuid>([0-9a-f-]{36})</uuid> */
		v = p + strlen("<uuid>");	/* the next search starts at p + 1 */
		if (strspn(v, "0123456789abcdef-") == 36 && !strncmp(v + 36, "</uuid>", 7)) {
			memcpy(H.uuid, v, 36);
			H.uuid[36] = '\0';
			break;
		}
	}
}

/* --- prepare: the reservation --- */

static const char *state_dir(void)
{
	const char *s = getenv("ZP_HOOK_STATE");

	return s && *s ? s : "/run/zeropin-hook";
}

static const char *libvirt_run(void)	/* libvirt's NAME.pid per running QEMU */
{
	const char *s = getenv("ZP_LIBVIRT_RUN");

	return s && *s ? s : "/run/libvirt/qemu";
}

static const char *sysfs_dir(void)
{
	const char *s = getenv("ZP_SYSFS");

	return s && *s ? s : "/sys/kernel/zeropin";
}

/* The mount's size and free space, MiB; false unless it is zeropinfs. */
static bool mount_figures(unsigned long long *size_mib, unsigned long long *free_mib)
{
	struct statfs sf;

	if (statfs(backing_dir, &sf) || sf.f_type != ZEROPINFS_MAGIC)
		return false;
	*size_mib = (unsigned long long)sf.f_bsize * sf.f_blocks / 1048576;
	*free_mib = (unsigned long long)sf.f_bsize * sf.f_bavail / 1048576;
	return true;
}

/*
 * MiB reserved by the other zeropin domains, stale reservations (no QEMU
 * after STALE_S: a start that failed past prepare with no release)
 * dropped, as the script's reserved_mib(). Caller holds the lock.
 */
static bool reserved_mib(const char *reserved, unsigned long long *sum)
{
	char f[PATH_MAX], p[PATH_MAX];
	unsigned long long n;
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(reserved);

	*sum = 0;
	if (!d)
		return false;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, H.domain))
			continue;
		if (!pathf(f, "%s/%s", reserved, de->d_name) || stat(f, &st) || !S_ISREG(st.st_mode))
			continue;
		if (!pathf(p, "%s/%s.pid", libvirt_run(), de->d_name))
			continue;
		if (!exists(p) && time(NULL) - st.st_mtime > STALE_S) {
			unlink(f);
			if (pathf(p, "%s/started/%s", state_dir(), de->d_name))
				unlink(p);
			continue;
		}
		if (read_number(f, &n))
			*sum += n;
	}
	closedir(d);
	return true;
}

/* flock LOCK_PATH within LOCK_WAIT_MS; the fd (close-on-exec), or -1. */
static int lock_hook(void)
{
	long long deadline = now_ms() + LOCK_WAIT_MS;
	int fd = open(LOCK_PATH, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK || now_ms() >= deadline) {
			close(fd);
			return -1;
		}
		sleep_ms(10);
	}
	return fd;
}

/*
 * Raise the pool's target to the domain's RAM if lower, the target before
 * the first raise kept as the base the release goes back to (the
 * script's raise_target()). Caller holds the lock.
 */
static bool raise_target(void)
{
	char target_path[PATH_MAX], base_path[PATH_MAX], text[32];
	unsigned long long target;

	if (!pathf(target_path, "%s/pool/target_mib", sysfs_dir()) ||
	    !pathf(base_path, "%s/target-base", state_dir()) || !read_number(target_path, &target))
		return false;
	if (target >= H.ram_mib)
		return true;
	snprintf(text, sizeof(text), "%llu\n", target);
	if (!exists(base_path) && !write_text(base_path, text))
		return false;
	fprintf(stderr, PROG ": echo %llu > %s\n", H.ram_mib, target_path);
	snprintf(text, sizeof(text), "%llu\n", H.ram_mib);
	return write_text(target_path, text);
}

/*
 * The script's prepare_mount(): the module loaded, room for the domain
 * on the mount (its free space, and its size less what the other
 * domains reserved, whichever is smaller), reserved for it under the
 * hook's lock, the pool's target raised. False, the lock dropped, for
 * the script to do or refuse.
 */
static bool reserve(void)
{
	char reserved[PATH_MAX], started[PATH_MAX], mine[PATH_MAX], text[64];
	unsigned long long size, free_mib, others, avail;
	bool ok = false, made;
	int lock;

	if (!exists("/sys/module/zeropin") || !mount_figures(&size, &free_mib) ||
	    !pathf(reserved, "%s/reserved", state_dir()) ||
	    !pathf(started, "%s/started/%s", state_dir(), H.domain) ||
	    !pathf(mine, "%s/%s", reserved, H.domain) || !mkdir_p(reserved, 0777, &made))
		return false;
	lock = lock_hook();
	if (lock < 0)
		return false;
	if (mount_figures(&size, &free_mib) && reserved_mib(reserved, &others)) {
		avail = size > others ? size - others : 0;
		if (free_mib < avail)
			avail = free_mib;
		snprintf(text, sizeof(text), "%llu %s\n", H.ram_mib, H.id);
		ok = avail >= H.ram_mib && (!unlink(started) || errno == ENOENT) &&
		     write_text(mine, text) && raise_target();
	}
	close(lock);
	return ok;
}

/* --- prepare: the folders libvirt would make and relabel --- */

static bool plain_name(void)
{
	return all_in(H.domain, ALNUM "._+-", 1) && H.id[0];	/* ^[A-Za-z0-9._+-]+$ */
}

#define MAX_HUGETLBFS 16	/* hugetlbfs mounts the fast path makes folders on */

/* mkdir -p -m 0700 DIR && chown QEMU's DIR: a folder, never a link's target. */
static bool make_qemu_folder(const char *dir)
{
	bool made, ok;
	int fd;

	if (!mkdir_p(dir, 0700, &made))
		return false;
	fd = open_folder_at(AT_FDCWD, dir);
	if (fd < 0)
		return false;
	ok = (!made || !fchmod(fd, 0700)) && !fchown(fd, H.uid, H.gid);
	close(fd);
	return ok;
}

/*
 * The script's premake_folders(): ID-NAME on every hugetlbfs mount
 * (qemu.conf's hugetlbfs_mount, else each mounted), QEMU's, 0700, made
 * before libvirt makes and relabels it (one AppArmor profile load each).
 * A failure is a warning: libvirt makes them.
 */
static void premake_folders(void)
{
	char dirs[MAX_HUGETLBFS + 1][PATH_MAX], line[PATH_MAX + 128], mnt[PATH_MAX], type[64], *save, *tok;
	int n = 0, i;
	bool ok = true;
	FILE *f;

	if (!plain_name())
		return;
	if (QC[QC_HUGETLBFS][0]) {
		char list[PATH_MAX];

		snprintf(list, sizeof(list), "%s", QC[QC_HUGETLBFS]);
		for (tok = strtok_r(list, " \t", &save); tok && n <= MAX_HUGETLBFS; tok = strtok_r(NULL, " \t", &save))
			if (pathf(dirs[n], "%s/libvirt/qemu/%s-%.*s", tok, H.id, SHORT_NAME, H.domain))
				n++;
	} else if ((f = fopen("/proc/mounts", "re"))) {
		while (n <= MAX_HUGETLBFS && fgets(line, sizeof(line), f))
			if (sscanf(line, "%*s %4095s %63s", mnt, type) == 2 && !strcmp(type, "hugetlbfs") &&
			    *mnt == '/' && all_in(mnt, ALNUM "._/+-", 1) &&	/* ^/[A-Za-z0-9._/+-]*$ */
			    pathf(dirs[n], "%s/libvirt/qemu/%s-%.*s", mnt, H.id, SHORT_NAME, H.domain))
				n++;
		fclose(f);
	}
	if (n > MAX_HUGETLBFS)
		to_script();	/* the script makes them all */
	for (i = 0; i < n && ok; i++)
		ok = make_qemu_folder(dirs[i]);
	if (ok)
		return;
	for (i = 0; i < n; i++)
		rmdir(dirs[i]);
	warn("domain %s: could not make its hugetlbfs folders for QEMU's user %s:%s; libvirt makes them",
	     H.domain, QC[QC_USER], QC[QC_GROUP]);
}

/* Does TEXT hold NEEDLE (at a line's start, with AT_LINE_START)? */
static bool text_has(const char *text, const char *needle, bool at_line_start)
{
	const char *hit;

	for (hit = text; (hit = strstr(hit, needle)); hit++)
		if (!at_line_start || hit == text || hit[-1] == '\n')
			return true;
	return false;
}

/* Does FILE (under ZP_APPARMOR_D) hold NEEDLE? */
static bool file_has(const char *file, const char *needle, bool at_line_start)
{
	char path[PATH_MAX], *text;
	const char *dir = getenv("ZP_APPARMOR_D");
	bool found;

	if (!pathf(path, "%s/%s", dir && *dir ? dir : "/etc/apparmor.d", file) || !(text = slurp(path)))
		return false;
	found = text_has(text, needle, at_line_start);
	free(text);
	return found;
}

/*
 * The script's apparmor_rule_in_force(): AppArmor on, libvirt's driver
 * AppArmor, and setup's rule for this mount included from libvirt's QEMU
 * abstraction (abstraction.d on libvirt >= 10, the local override before;
 * the abstraction read once).
 */
static bool apparmor_rule_in_force(void)
{
	const char *sec = getenv("ZP_SECURITYFS"), *dir = getenv("ZP_APPARMOR_D");
	const char *include = "include if exists <abstractions/zeropin-qemu>";
	char path[PATH_MAX], rule[PATH_MAX + 64], drivers[PATH_MAX + 2], *abstraction;
	bool in_force = false;
	struct stat st;

	if (!pathf(path, "%s/apparmor", sec && *sec ? sec : "/sys/kernel/security") ||
	    stat(path, &st) || !S_ISDIR(st.st_mode))
		return false;
	snprintf(drivers, sizeof(drivers), " %s ", QC[QC_SECDRIVER]);
	if (QC[QC_SECDRIVER][0] && !strstr(drivers, " apparmor "))
		return false;
	snprintf(rule, sizeof(rule), "\"%s/%s/@{profile_name}/{,**}\" rwk,", backing_dir, DOMAINS_DIR);
	if (!file_has("abstractions/zeropin-qemu", rule, false) ||
	    !pathf(path, "%s/abstractions/libvirt-qemu", dir && *dir ? dir : "/etc/apparmor.d") ||
	    !(abstraction = slurp(path)))
		return false;
	if (text_has(abstraction, "include if exists <abstractions/libvirt-qemu.d>", false))
		in_force = file_has("abstractions/libvirt-qemu.d/zeropin", include, false);
	else if (text_has(abstraction, "include <local/abstractions/libvirt-qemu>", false))
		in_force = file_has("local/abstractions/libvirt-qemu", include, true);
	free(abstraction);
	return in_force;
}

/* The script's machine=['"](pc|q35|pc-[A-Za-z0-9._-]+)['"] past <metadata>. */
static bool pc_machine(void)
{
	const char *p, *v;
	size_t n;

	for (p = H.tail; (p = strstr(p, "machine=")); p++) {
		v = p + strlen("machine=");
		if (*v != '\'' && *v != '"')
			continue;
		n = strspn(++v, ALNUM "._-");
		if ((v[n] == '\'' || v[n] == '"') &&
		    ((n == 2 && !strncmp(v, "pc", 2)) || (n == 3 && !strncmp(v, "q35", 3)) ||
		     (n > 3 && !strncmp(v, "pc-", 3))))
			return true;
	}
	return false;
}

/* The script's ram_aliases(): the memory backends' ids (ram-nodeN per
 * NUMA cell, else pc.ram) on pc and q35; 0 for anything else. */
static int ram_aliases(void)
{
	const char *p = H.tail;
	int cells = 0;

	if (strstr(H.tail, "<memory model=") || strstr(H.tail, "<maxMemory") || !pc_machine())
		return 0;
	while ((p = strstr(p, "<cell ")))
		p++, cells++;
	return cells ? cells : -1;	/* -1: pc.ram */
}

static bool libvirts_label(const char *attrs)
{
	if (quoted_after(attrs, "type=", "static") || quoted_after(attrs, "relabel=", "no"))
		return false;
	return !quoted_after(attrs, "model=", "dac") || (attrs[0] && attrs[strlen(attrs) - 1] == '/');
}

/* The script's own_seclabels(): libvirt's own labels, no static one, no
 * relabel='no', no per-domain DAC label. */
static bool own_seclabels(void)
{
	return seclabels_all(false, libvirts_label);
}

/* The script's stale_links_folder(): libvirt's folder LIB is absent, or
 * holds only links into MOUNT/domains (a start that never got to its
 * release): removed. False when it is libvirt's. */
static bool stale_links_folder(const char *lib)
{
	char f[PATH_MAX], target[PATH_MAX], prefix[PATH_MAX];
	struct dirent *de;
	struct stat st;
	bool ok = true;
	ssize_t n;
	DIR *d;

	if (!exists(lib))
		return true;
	if (lstat(lib, &st) || !S_ISDIR(st.st_mode) || !(d = opendir(lib)) ||
	    !pathf(prefix, "%s/%s/", backing_dir, DOMAINS_DIR))
		return false;
	while (ok && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ok = pathf(f, "%s/%s", lib, de->d_name) && (n = readlink(f, target, sizeof(target) - 1)) > 0 &&
		     (target[n] = '\0', !strncmp(target, prefix, strlen(prefix)));
	}
	closedir(d);
	return ok && rm_rf(lib);
}

static void close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* A new folder NAME in DIRFD, mode exactly MODE, opened; -1 if not. */
static int new_folder_at(int dirfd, const char *name, mode_t mode)
{
	int fd;

	if (mkdirat(dirfd, name, mode))
		return -1;
	fd = open_folder_at(dirfd, name);
	if (fd >= 0 && fchmod(fd, mode)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * The script's make_ram_folder(): OWN (MOUNT/domains/libvirt-UUID) with an
 * empty file per backend, LIB (MOUNT/libvirt/qemu/ID-NAME) with a link to
 * each, all QEMU's, the folders 0700, MOUNT/domains root's, 0711. Made by
 * root, given to QEMU's user last, each step relative to a folder's fd:
 * LIB's parent is QEMU's user's, and nothing there is followed.
 */
static bool make_ram_folder(const char *own, const char *lib, int aliases)
{
	char top[PATH_MAX], lib_parent[PATH_MAX], alias[32], target[PATH_MAX];
	int top_fd = -1, own_fd = -1, parent_fd = -1, lib_fd = -1, fd, i;
	int n = aliases < 0 ? 1 : aliases;
	const char *own_name = strrchr(own, '/') + 1, *lib_name = strrchr(lib, '/') + 1;
	struct stat st;
	bool ok = false;

	if (!pathf(top, "%s/%s", backing_dir, DOMAINS_DIR) ||
	    !pathf(lib_parent, "%.*s", (int)(lib_name - 1 - lib), lib))
		return false;
	/* MOUNT/domains: root's own folder, not a link (made 0711, as the mount) */
	if (mkdir(top, 0711) == 0) {
		top_fd = open_folder_at(AT_FDCWD, top);
		if (top_fd < 0 || fchmod(top_fd, 0711))
			goto out;
	} else if (errno != EEXIST || (top_fd = open_folder_at(AT_FDCWD, top)) < 0) {
		goto out;
	}
	if (fstat(top_fd, &st) || st.st_uid != geteuid())
		goto out;
	own_fd = new_folder_at(top_fd, own_name, 0700);
	parent_fd = open(lib_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own_fd < 0 || parent_fd < 0)
		goto out;
	lib_fd = new_folder_at(parent_fd, lib_name, 0700);
	if (lib_fd < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (aliases < 0)
			snprintf(alias, sizeof(alias), "pc.ram");
		else
			snprintf(alias, sizeof(alias), "ram-node%d", i);
		fd = openat(own_fd, alias, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
		if (fd < 0 || close(fd) || !pathf(target, "%s/%s", own, alias) || symlinkat(target, lib_fd, alias))
			goto out;
	}
	for (i = 0; i < n; i++) {
		if (aliases < 0)
			snprintf(alias, sizeof(alias), "pc.ram");
		else
			snprintf(alias, sizeof(alias), "ram-node%d", i);
		if (fchownat(own_fd, alias, H.uid, H.gid, AT_SYMLINK_NOFOLLOW) ||
		    fchownat(lib_fd, alias, H.uid, H.gid, AT_SYMLINK_NOFOLLOW))
			goto out;
	}
	ok = !fchown(own_fd, H.uid, H.gid) && !fchown(lib_fd, H.uid, H.gid);
out:
	close_fd(top_fd);
	close_fd(own_fd);
	close_fd(parent_fd);
	close_fd(lib_fd);
	return ok;
}

/*
 * The script's premake_ram_folder(): the domain's RAM folder
 * MOUNT/domains/libvirt-UUID and libvirt's MOUNT/libvirt/qemu/ID-NAME of
 * links to it, made before libvirt makes (and relabels) its folder,
 * where setup's AppArmor rule lets the domain's QEMU open its own and no
 * other. Anything else is left to libvirt.
 */
static void premake_ram_folder(void)
{
	char own[PATH_MAX], lib[PATH_MAX];
	int aliases;

	if (!plain_name() || !H.uuid[0] ||
	    !pathf(own, "%s/%s/libvirt-%s", backing_dir, DOMAINS_DIR, H.uuid) ||
	    !pathf(lib, "%s/libvirt/qemu/%s-%.*s", backing_dir, H.id, SHORT_NAME, H.domain))
		return;
	if (!rm_rf(own))	/* a stopped domain's that no release removed */
		to_script();
	aliases = ram_aliases();
	if (!apparmor_rule_in_force() || !aliases || !own_seclabels() || !stale_links_folder(lib))
		return;
	if (make_ram_folder(own, lib, aliases))
		return;
	rm_rf(lib);
	rm_rf(own);
	warn("domain %s: could not make its RAM folder %s for QEMU's user %s:%s; libvirt makes its own (one more AppArmor profile load)",
	     H.domain, own, QC[QC_USER], QC[QC_GROUP]);
}

/* The script's prepare_pool(): wait for the pool to hold the domain's RAM
 * zeroed, at most ZEROPIN_HOOK_WAIT_S; past that, start anyway. */
static void wait_for_pool(void)
{
	char path[PATH_MAX];
	unsigned long long zero;
	long long deadline = now_ms() + C.wait_s * 1000;

	if (!pathf(path, "%s/pool/zero_mib", sysfs_dir()))
		return;
	while (read_number(path, &zero) && zero < H.ram_mib) {
		if (now_ms() >= deadline) {
			warn("domain %s: the pool holds %llu of %llu MiB zeroed after %ld s; starting anyway (the rest is zeroed as the guest faults it in)",
			     H.domain, zero, H.ram_mib, C.wait_s);
			return;
		}
		sleep_ms(POOL_POLL_MS);
	}
}

/* --- the operations --- */

/* `started begin`: QEMU has its guest RAM; the script's mark_started(). */
static int mark_started(void)
{
	char mine[PATH_MAX], dir[PATH_MAX], file[PATH_MAX];
	struct stat st;
	bool made;

	if (!pathf(mine, "%s/reserved/%s", state_dir(), H.domain) || stat(mine, &st) || !S_ISREG(st.st_mode) ||
	    !pathf(dir, "%s/started", state_dir()) || !pathf(file, "%s/%s", dir, H.domain))
		return 0;
	if (mkdir_p(dir, 0777, &made))
		write_text(file, "");
	return 0;
}

/* The script's <source[[:space:]]+type=["']file["'] anywhere in the XML. */
static bool file_source(void)
{
	const char *p, *q;

	for (p = H.xml; (p = strstr(p, "<source")); p++) {
		q = p + strlen("<source");
		if (isspace((unsigned char)*q) && quoted_at(q + strspn(q, SPACE), "type=", "file"))
			return true;
	}
	return false;
}

/*
 * `prepare begin`: nothing for a domain whose RAM is not file-backed (or
 * is on hugetlbfs); for a zeropin domain the script's prepare, here when
 * every input is one the fast path reads as the script does.
 */
static int prepare(void)
{
	unsigned int uid, gid;

	read_xml();
	if (!file_source() || strstr(H.tail, "<hugepages"))
		return 0;
	if (!conf_load())
		to_script();
	if (!qemu_conf_read())
		to_script();
	snprintf(backing_dir, sizeof(backing_dir), "%s", QC[QC_BACKING][0] ? QC[QC_BACKING] : DEFAULT_BACKING_DIR);
	if (!QC[QC_USER][0])
		snprintf(QC[QC_USER], PATH_MAX, DEFAULT_QEMU_ID);
	if (!QC[QC_GROUP][0])
		snprintf(QC[QC_GROUP], PATH_MAX, DEFAULT_QEMU_ID);
	/* a path as the script compares it (no trailing /), on zeropinfs */
	if (backing_dir[0] != '/' || backing_dir[strlen(backing_dir) - 1] == '/' ||
	    !qemu_id(QC[QC_USER], false, &uid) || !qemu_id(QC[QC_GROUP], true, &gid))
		to_script();
	H.uid = uid;
	H.gid = gid;
	if (!read_ram() || !confined())
		to_script();
	domain_id_uuid();
	if (!reserve())
		to_script();
	premake_folders();
	premake_ram_folder();
	wait_for_pool();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SCRIPT DOMAIN OPERATION SUB-OPERATION [EXTRA] (the interpreter of zeropin's libvirt hook)\n",
			argv[0]);
		return 2;
	}
	H.argv = argv + 1;
	if (argc < 5 || argv[2][0] == '-')
		to_script();
	H.domain = argv[2];
	if (!strcmp(argv[3], "prepare") && !strcmp(argv[4], "begin"))
		return prepare();
	if (!strcmp(argv[3], "started") && !strcmp(argv[4], "begin"))
		return mark_started();
	if (!strcmp(argv[3], "release") && !strcmp(argv[4], "end"))
		to_script();
	return 0;
}
