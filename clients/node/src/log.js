// Structured logs: the client and the runner call a logger with a message
// and an object of snake_case attributes (job_id, owner, token, ...).

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * A logger that writes one JSON object per line ({time, level, msg, ...attrs})
 * to `stream` (default process.stderr), dropping lines below `level`
 * (`debug`, `info`, `warn` or `error`; default `info`). Any object with the
 * methods debug, info, warn and error(msg, attrs) (pino, winston, console
 * adapters) may be passed to the client and the runner instead.
 */
export function jsonLogger({ level = 'info', stream = process.stderr } = {}) {
  const min = LEVELS[level];
  if (min === undefined) {
    throw new RangeError(`log level ${JSON.stringify(level)} must be one of ${Object.keys(LEVELS).join(', ')}`);
  }
  const write = (lvl) => (msg, attrs = {}) => {
    if (LEVELS[lvl] < min) {
      return;
    }
    const line = { time: new Date().toISOString(), level: lvl, msg };
    for (const [k, v] of Object.entries(attrs)) {
      line[k] = v instanceof Error ? v.message : v instanceof Date ? v.toISOString() : v;
    }
    stream.write(JSON.stringify(line) + '\n');
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}
