// What a variable name may be, for `env:`, `env_file` lines and an imported crontab's variables:
// the POSIX shell's rule, so that every name a job receives can be read back by `sh`.
export const ENV_NAME_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$";
export const ENV_NAME = new RegExp(ENV_NAME_PATTERN);
/** The prefix of the variables cronvisor itself hands every run; a config may not set them. */
export const RESERVED_ENV_PREFIX = "CRONVISOR_";
export const isReservedEnvName = (name: string): boolean => name.startsWith(RESERVED_ENV_PREFIX);
