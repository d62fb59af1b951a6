/*
 * A stand-in for NVIDIA's pyxis, for obc's tests: a SPANK plugin that gives srun and sbatch
 * the options pyxis 0.24 has (same names, same argument or flag kind), so that the real
 * Slurm accepts or refuses them as a cluster with pyxis would. It runs no container: in
 * slurmstepd, just before each task starts natively, it appends one JSON line to the file
 * named by the plugstack.conf argument `record=PATH`:
 *
 *   {"job": 7, "step": "0", "task": 1, "node": 1, "pid": 4242, "cwd": "/submit/dir",
 *    "options": {"container-image": "img", "no-container-mount-home": true, ...},
 *    "argv": ["cmd", "arg"], "env": {"NAME": "value", ...}}
 *
 * `step` is "batch" for the batch script; `node` is the node's index in the step; `options`
 * holds the options given (value, or true for a flag); strings are the bytes Slurm holds,
 * with quote, backslash and control characters escaped.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(fake_pyxis, 1)

static int check_option(int val, const char *optarg, int remote);

/* pyxis's options; `val` is each one's index here, so the check knows which it was given. */
static struct spank_option options[] = {
	{"container-image", "IMAGE|SQUASHFS", "[fake pyxis] image", 1, 0, check_option},
	{"container-mounts", "SRC:DST[:FLAGS],...", "[fake pyxis] bind mounts", 1, 1, check_option},
	{"container-workdir", "PATH", "[fake pyxis] working directory", 1, 2, check_option},
	{"container-name", "NAME[:FLAG]", "[fake pyxis] named container", 1, 3, check_option},
	{"container-save", "PATH", "[fake pyxis] save to squashfs", 1, 4, check_option},
	{"container-mount-home", NULL, "[fake pyxis] mount home", 0, 5, check_option},
	{"no-container-mount-home", NULL, "[fake pyxis] do not mount home", 0, 6, check_option},
	{"container-remap-root", NULL, "[fake pyxis] remap to root", 0, 7, check_option},
	{"no-container-remap-root", NULL, "[fake pyxis] do not remap", 0, 8, check_option},
	{"container-entrypoint", NULL, "[fake pyxis] run entrypoint", 0, 9, check_option},
	{"no-container-entrypoint", NULL, "[fake pyxis] skip entrypoint", 0, 10, check_option},
	{"container-entrypoint-log", NULL, "[fake pyxis] entrypoint log", 0, 11, check_option},
	{"container-writable", NULL, "[fake pyxis] writable root", 0, 12, check_option},
	{"container-readonly", NULL, "[fake pyxis] read-only root", 0, 13, check_option},
	{"container-env", "NAME[,NAME...]", "[fake pyxis] host values win", 1, 14, check_option},
	{"container-unshare", "NS[,NS...]", "[fake pyxis] new namespaces", 1, 15, check_option},
	SPANK_OPTIONS_TABLE_END
};

/* A path as pyxis takes it: absolute or relative, told apart from a name by its start. */
static int is_path(const char *text)
{
	return text[0] == '/' || text[0] == '.';
}

/* pyxis's mount syntax: entries split on ",", each SRC[:DST[:FLAGS]] (flags joined by "+"). */
static int check_mounts(const char *list)
{
	char *copy = strdup(list), *rest = copy, *entry;
	int ok = copy != NULL;

	while (ok && (entry = strsep(&rest, ",")) != NULL) {
		char *source = strsep(&entry, ":"), *target = strsep(&entry, ":");

		ok = (is_path(source) || !strcmp(source, "tmpfs") || !strcmp(source, "umount")) &&
		     (target == NULL || is_path(target));
	}
	free(copy);
	return ok;
}

/* A comma-separated list with an empty entry (",A", "A,,B", "A,"). */
static int has_empty_entry(const char *list)
{
	size_t length = strlen(list);

	return list[0] == ',' || list[length - 1] == ',' || strstr(list, ",,") != NULL;
}

/* What pyxis refuses too: an empty argument, a mount it cannot parse, an empty name. */
static int check_option(int val, const char *optarg, int remote)
{
	const struct spank_option *option = &options[val];
	const char *name = option->name;

	if (option->has_arg && (optarg == NULL || optarg[0] == '\0' ||
				(!strcmp(name, "container-mounts") && !check_mounts(optarg)) ||
				(!strcmp(name, "container-env") && has_empty_entry(optarg)))) {
		slurm_error("fake_pyxis: --%s: invalid argument: '%s'", option->name,
			    optarg ? optarg : "");
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	for (int i = 0; options[i].name != NULL; i++)
		if (spank_option_register(sp, &options[i]) != ESPANK_SUCCESS)
			return -1;
	return 0;
}

static void put_bytes(FILE *out, const char *text, size_t length)
{
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)text; length--; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

static void put_string(FILE *out, const char *text)
{
	put_bytes(out, text, strlen(text));
}

static void put_options(spank_t sp, FILE *out)
{
	const char *separator = "";

	fputs("\"options\": {", out);
	for (int i = 0; options[i].name != NULL; i++) {
		char *value = NULL;

		if (spank_option_getopt(sp, &options[i], &value) != ESPANK_SUCCESS)
			continue;
		fputs(separator, out);
		put_string(out, options[i].name);
		fputs(": ", out);
		if (options[i].has_arg)
			put_string(out, value);
		else
			fputs("true", out);
		separator = ", ";
	}
	fputs("}", out);
}

static void put_argv_and_env(spank_t sp, FILE *out)
{
	int argc = 0;
	char **argv = NULL, **env = NULL;
	const char *separator = "";

	spank_get_item(sp, S_JOB_ARGV, &argc, &argv);
	fputs(", \"argv\": [", out);
	for (int i = 0; i < argc; i++) {
		fputs(i ? ", " : "", out);
		put_string(out, argv[i]);
	}
	spank_get_item(sp, S_JOB_ENV, &env);
	fputs("], \"env\": {", out);
	for (int i = 0; env && env[i]; i++) {
		const char *equals = strchr(env[i], '=');

		if (equals == NULL)
			continue;
		fputs(separator, out);
		put_bytes(out, env[i], equals - env[i]);
		fputs(": ", out);
		put_string(out, equals + 1);
		separator = ", ";
	}
	fputs("}}\n", out);
}

/* One write per record, with O_APPEND, so that tasks recording at once do not interleave. */
static int append(const char *path, const char *line, size_t size)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	int ok = fd >= 0 && write(fd, line, size) == (ssize_t)size;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0, task = 0, node = 0;
	char cwd[4096] = "", *line = NULL;
	size_t size = 0;
	FILE *out;
	int rc;

	if (ac < 1 || strncmp(av[0], "record=", 7) != 0) {
		slurm_error("fake_pyxis: plugstack.conf must give record=PATH");
		return -1;
	}
	spank_get_item(sp, S_JOB_ID, &job);
	spank_get_item(sp, S_JOB_STEPID, &step);
	spank_get_item(sp, S_TASK_GLOBAL_ID, &task);
	spank_get_item(sp, S_JOB_NODEID, &node);
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		cwd[0] = '\0';
	out = open_memstream(&line, &size);
	if (out == NULL)
		return -1;
	fprintf(out, "{\"job\": %u, \"step\": ", job);
	if (step == SLURM_BATCH_SCRIPT)
		fputs("\"batch\"", out);
	else
		fprintf(out, "\"%u\"", step);
	fprintf(out, ", \"task\": %u, \"node\": %u, \"pid\": %d, \"cwd\": ", task, node,
		(int)getpid());
	put_string(out, cwd);
	fputs(", ", out);
	put_options(sp, out);
	put_argv_and_env(sp, out);
	fclose(out);
	rc = append(av[0] + 7, line, size);
	free(line);
	if (rc < 0)
		slurm_error("fake_pyxis: cannot append to %s", av[0] + 7);
	return rc;
}
