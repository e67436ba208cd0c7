// SPDX-License-Identifier: GPL-2.0
/*
 * module_load - zeropin.ko loads into the lab kernel, shows its version in
 * sysfs, refuses a second load, and unloads leaving nothing behind.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "zeropin.h"

/* Load/unload rounds: enough to catch a leaked kobject or sysfs entry. */
#define LOAD_CYCLES	20

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	if (!fgets(buf, len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

FIXTURE(module) {
	int unused;
};

FIXTURE_SETUP(module)
{
	__zeropin_unload();	/* a clean start even after a failed test */
}

FIXTURE_TEARDOWN(module)
{
	__zeropin_unload();
}

TEST_F(module, load_shows_version_unload)
{
	char version[64];

	ASSERT_EQ(0, __zeropin_load(""));
	ASSERT_EQ(0, read_line(ZEROPIN_SYSFS "/version", version, sizeof(version)));
	EXPECT_STREQ(ZEROPIN_EXPECTED_VERSION, version);
	ASSERT_EQ(0, read_line("/sys/module/zeropin/version", version, sizeof(version)));
	EXPECT_STREQ(ZEROPIN_EXPECTED_VERSION, version);
	ASSERT_EQ(0, __zeropin_unload());
	EXPECT_EQ(-1, access(ZEROPIN_SYSFS, F_OK));
	EXPECT_EQ(-1, access("/sys/module/zeropin", F_OK));
}

TEST_F(module, second_load_is_refused)
{
	ASSERT_EQ(0, __zeropin_load(""));
	EXPECT_EQ(-EEXIST, __zeropin_load(""));
	EXPECT_EQ(0, __zeropin_unload());
	EXPECT_EQ(-ENOENT, __zeropin_unload());
}

TEST_F(module, version_is_not_writable)
{
	struct stat st;

	ASSERT_EQ(0, __zeropin_load(""));
	ASSERT_EQ(0, stat(ZEROPIN_SYSFS "/version", &st));
	EXPECT_EQ(0444, st.st_mode & 0777);
}

TEST_F(module, no_knob_is_world_writable)
{
	static const char *const knobs[] = {
		ZEROPIN_SYSFS "/version", ZEROPIN_POOL "/target_mib",
		ZEROPIN_POOL "/zero_mib", ZEROPIN_POOL "/dirty_mib",
		ZEROPIN_POOL "/inuse_mib", ZEROPIN_POOL "/runs_1g",
	};
	struct stat st;
	size_t i;

	ASSERT_EQ(0, __zeropin_load(""));
	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		ASSERT_EQ(0, stat(knobs[i], &st)) TH_LOG("%s", knobs[i]);
		EXPECT_EQ(0, st.st_mode & 0002) TH_LOG("%s is world-writable", knobs[i]);
	}
	ASSERT_EQ(0, stat(ZEROPIN_POOL "/target_mib", &st));
	EXPECT_EQ(0644, st.st_mode & 0777);
}

TEST_F(module, pool_mib_parameter_sets_the_target)
{
	ASSERT_EQ(0, __zeropin_load("pool_mib=64"));
	EXPECT_EQ(64, pool_read("target_mib"));
	EXPECT_EQ(0, pool_wait("zero_mib", 64, 30000));
	EXPECT_EQ(0, __zeropin_unload());
	EXPECT_EQ(-EINVAL, __zeropin_load("pool_mib=lots"));
	EXPECT_EQ(-1, access(ZEROPIN_SYSFS, F_OK));
}

TEST_F(module, load_unload_cycles)
{
	int i;

	for (i = 0; i < LOAD_CYCLES; i++) {
		ASSERT_EQ(0, __zeropin_load(""));
		ASSERT_EQ(0, __zeropin_unload());
	}
	EXPECT_EQ(-1, access(ZEROPIN_SYSFS, F_OK));
}

TEST_HARNESS_MAIN
