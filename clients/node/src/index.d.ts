// Declarations of the leaseapi package; the wire types come from
// src/schema.d.ts, generated from api/openapi.yaml (make generate).

import type { components, operations } from './schema.js';

type Schemas = components['schemas'];

/** A time field read as a Date; null when absent, null, or unreadable (then `fieldErrors` names it). */
type Timed<T, K extends keyof T> = Omit<T, K> & { [P in K]-?: Date | null };
/** What the client adds to every object it reads. */
interface Read {
  /** The time fields that could not be read, by name, and why. */
  readonly fieldErrors: Record<string, string>;
  /** The JSON as received. */
  readonly raw: unknown;
}

export type Lease = Timed<Schemas['Lease'], 'acquiredAt' | 'renewedAt' | 'expiresAt' | 'releasedAt' | 'tick' | 'lastCompletedTick' | 'nextTick' | 'pausedAt' | 'owedTick'> & Read;
export type Run = Timed<Schemas['Run'], 'tick' | 'startedAt' | 'endedAt'> & Read;
export type LeaseList = Omit<Timed<Schemas['LeaseList'], 'serverTime'>, 'leases'> & { leases: Lease[] } & Read;
export type RunList = { runs: Run[] } & Read;
export type RecentRunList = Omit<Timed<Schemas['RecentRunList'], 'serverTime'>, 'runs'> & { runs: Run[] } & Read;
export type Stats = Timed<Schemas['Stats'], 'serverTime'> & Read;
export type Owed = Timed<Schemas['Owed'], 'tick'> & Read;
export type OwedList = { owed: Owed[] } & Read;
export type Whoami = Schemas['Whoami'] & Read;
export type Status = Schemas['Status'] & Read;
export type Health = Schemas['Health'] & Read;
export type Credential = Timed<Schemas['Credential'], 'createdAt'> & Read;
export type CreatedCredential = Timed<Schemas['CreatedCredential'], 'createdAt'> & Read;
export type CredentialList = { credentials: Credential[] } & Read;
export type WebhookDelivery = Timed<Schemas['WebhookDelivery'], 'at'> & Read;
export type WebhookDeliveryList = { deliveries: WebhookDelivery[] } & Read;
export type Webhook = Omit<Timed<Schemas['Webhook'], 'createdAt'>, 'lastDelivery'> & { lastDelivery?: WebhookDelivery | null } & Read;
export type CreatedWebhook = Omit<Timed<Schemas['CreatedWebhook'], 'createdAt'>, 'lastDelivery'> & { lastDelivery?: WebhookDelivery | null } & Read;
export type WebhookList = { webhooks: Webhook[] } & Read;
export type GroupHolder = Timed<Schemas['GroupHolder'], 'expiresAt'> & Read;
export type Group = Omit<Timed<Schemas['Group'], 'createdAt'>, 'holders'> & { holders: GroupHolder[] } & Read;
export type GroupList = Omit<Schemas['GroupList'], 'groups'> & { groups: Group[] } & Read;
/** A job's alert policy and where it stands: `status` ok or alerting, `alertReasons` of the current episode. */
export type JobPolicy = Timed<Schemas['JobPolicy'], 'statusSince' | 'lastAlertAt' | 'updatedAt'> & Read;
/** The body of putPolicy: the conditions, at least one of consecutiveFailures, failureRate, maxRuntimeMs, minRuntimeMs, missedTicks. */
export type PolicyBody = Schemas['PolicyBody'];

/** The problem codes of leaseapi, and the two the client sets itself. */
export type ErrorCode = Schemas['Problem']['code'] | 'connection_failed' | 'protocol_error';

/** The error every call throws. */
export class LeaseApiError extends Error {
  readonly code: ErrorCode;
  readonly status?: number;
  readonly title?: string;
  readonly detail: string;
  /** The lease a conflict (409) is about. */
  readonly lease?: Lease;
  /** The server's clock of a tick_ahead. */
  readonly now?: Date;
  /** The concurrency group of a group_full, with up to 10 holders. */
  readonly group?: Group;
  /** Seconds of the Retry-After header. */
  readonly retryAfter?: number;
  readonly requestId?: string;
  /** lease_held, tick_done, job_paused, tick_ahead, too_soon or group_full: skip this tick (the runner retries group_full within the tick's grace first). */
  readonly notAcquired: boolean;
  /** 429, 503 or no answer: retried until a call's deadline. */
  readonly retryable: boolean;
}
export const NOT_ACQUIRED: ReadonlySet<string>;

/** A structured logger: a message and snake_case attributes. */
export interface Logger {
  debug(msg: string, attrs?: Record<string, unknown>): void;
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}
export function jsonLogger(options?: { level?: 'debug' | 'info' | 'warn' | 'error'; stream?: { write(s: string): unknown } }): Logger;

export interface Exchange {
  method: string;
  path: string;
  requestBody: unknown;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface ClientOptions {
  token?: string;
  ca?: string | Uint8Array | Array<string | Uint8Array>;
  timeoutMs?: number;
  retryForMs?: number;
  logger?: Logger;
  userAgent?: string;
  onExchange?: (e: Exchange) => void;
}

/** Per call: override the client's retry window and timeout, or abort. */
export interface CallOptions {
  retryForMs?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}

type AcquireBody = Schemas['AcquireRequest'];
export interface AcquireOptions extends Omit<AcquireBody, 'tick'> {
  tick?: Date;
}
/** One acquire of acquireBatch: the job, and the acquire's fields it sets itself. */
export interface AcquireItem extends Omit<Schemas['AcquireBatchItem'], 'tick'> {
  tick?: Date;
}
/** The defaults of every item of acquireBatch that does not set its own. */
export type AcquireDefaults = Partial<AcquireOptions>;
/** One heartbeat of heartbeatBatch. */
export type HeartbeatItem = Schemas['HeartbeatBatchItem'];
/** The defaults of every item of heartbeatBatch. */
export type HeartbeatDefaults = Omit<Schemas['HeartbeatBatchRequest'], 'items'>;
/** One item's result in a batch: the lease its single call would have resolved to, or the error it would have thrown. */
export type BatchResult = Lease | LeaseApiError;
type ListQuery = NonNullable<operations['listLeases']['parameters']['query']>;

export class Client {
  constructor(url: string, options?: ClientOptions);
  readonly url: string;
  static readonly OPERATIONS: Readonly<Record<string, string>>;
  static readonly NOT_CALLS: Readonly<Record<string, string>>;
  close(): void;
  acquire(jobId: string, body: AcquireOptions, opts?: CallOptions): Promise<Lease>;
  heartbeat(jobId: string, body: Schemas['HeartbeatRequest'], opts?: CallOptions): Promise<Lease>;
  release(jobId: string, body: Schemas['ReleaseRequest'], opts?: CallOptions): Promise<Lease>;
  /** Several acquires in one request; one result per item, in item order. */
  acquireBatch(items: AcquireItem[], defaults?: AcquireDefaults, opts?: CallOptions): Promise<BatchResult[]>;
  /** Several heartbeats in one request; one result per item, in item order. */
  heartbeatBatch(items: HeartbeatItem[], defaults?: HeartbeatDefaults, opts?: CallOptions): Promise<BatchResult[]>;
  owed(jobIds: string[], opts?: CallOptions): Promise<OwedList>;
  get(jobId: string, opts?: CallOptions): Promise<Lease>;
  list(query?: ListQuery, opts?: CallOptions): Promise<LeaseList>;
  leases(filters?: Omit<ListQuery, 'cursor'>, opts?: CallOptions): AsyncGenerator<Lease>;
  runs(jobId: string, query?: { limit?: number }, opts?: CallOptions): Promise<RunList>;
  recentRuns(query?: { outcomes?: Array<Schemas['Run']['outcome']>; limit?: number; cursor?: string }, opts?: CallOptions): Promise<RecentRunList>;
  stats(opts?: CallOptions): Promise<Stats>;
  whoami(opts?: CallOptions): Promise<Whoami>;
  revoke(jobId: string, opts?: CallOptions): Promise<Lease>;
  pause(jobId: string, body?: Schemas['PauseRequest'], opts?: CallOptions): Promise<Lease>;
  resume(jobId: string, opts?: CallOptions): Promise<Lease>;
  repair(jobId: string, body?: Schemas['RepairRequest'], opts?: CallOptions): Promise<Lease>;
  trigger(jobId: string, body?: Schemas['TriggerRequest'] & { idempotencyKey?: string }, opts?: CallOptions): Promise<Lease>;
  cancelTrigger(jobId: string, opts?: CallOptions): Promise<Lease>;
  forgetSchedule(jobId: string, opts?: CallOptions): Promise<Lease>;
  createCredential(body: Schemas['CreateCredentialRequest'], opts?: CallOptions): Promise<CreatedCredential>;
  credentials(opts?: CallOptions): Promise<CredentialList>;
  deleteCredential(id: string, opts?: CallOptions): Promise<void>;
  createWebhook(body: Schemas['CreateWebhookRequest'], opts?: CallOptions): Promise<CreatedWebhook>;
  webhooks(opts?: CallOptions): Promise<WebhookList>;
  deleteWebhook(id: string, opts?: CallOptions): Promise<void>;
  webhookDeliveries(id: string, opts?: CallOptions): Promise<WebhookDeliveryList>;
  putGroup(name: string, body: Schemas['PutGroupRequest'], opts?: CallOptions): Promise<Group>;
  getGroup(name: string, opts?: CallOptions): Promise<Group>;
  listGroups(query?: { prefix?: string; limit?: number; cursor?: string }, opts?: CallOptions): Promise<GroupList>;
  groups(query?: { prefix?: string; limit?: number }, opts?: CallOptions): AsyncGenerator<Group>;
  deleteGroup(name: string, opts?: CallOptions): Promise<void>;
  leaveGroup(jobId: string, opts?: CallOptions): Promise<Lease>;
  putPolicy(jobId: string, body: PolicyBody, opts?: CallOptions): Promise<JobPolicy>;
  policy(jobId: string, opts?: CallOptions): Promise<JobPolicy>;
  deletePolicy(jobId: string, opts?: CallOptions): Promise<void>;
  healthz(opts?: CallOptions): Promise<Health>;
  readyz(opts?: CallOptions): Promise<Status>;
  metrics(opts?: CallOptions): Promise<string>;
  openapi(opts?: CallOptions): Promise<string>;
}

export function jitter(ms: number): number;
/** The most items one batch request takes. */
export const MAX_BATCH_ITEMS: number;
export function parseTime(text: string): Date;
export function formatTime(date: Date): string;
export function decode(schema: string, data: unknown): unknown;
export const SCHEMAS: Readonly<Record<string, { times: string[]; nested?: Record<string, string | [string]> }>>;

/** Why the runner aborted a job's signal (signal.reason). */
export class RunStoppedError extends Error {
  readonly reason: 'lease_lost' | 'deadline' | 'max_run_time' | 'shutdown' | 'abandoned';
}

/** What a job gets. */
export interface RunContext {
  signal: AbortSignal;
  lease: Lease;
  /** The fencing token: pass it to what the job writes to. */
  token: number;
  /** The slot of its concurrency group the grant took, and the group's fencing token of it; null outside a group. */
  slot: number | null;
  slotToken: number | null;
  tick: Date | null;
  jobId: string;
  owner: string;
}

export interface RunOptions {
  tick?: Date;
  nearestTick?: boolean;
  schedule?: string;
  graceMs?: number;
  catchUp?: 'none' | 'latest';
  catchUpWindowMs?: number;
  /** The job's concurrency group; '' takes it out of its group. */
  group?: string;
  /** The least time between two runs of the job (by the server's clock); a run sooner is skipped with too_soon. */
  minIntervalMs?: number;
  maxRunTimeMs?: number;
}

export interface RunReport<T = unknown> {
  jobId: string;
  owner: string;
  token: number;
  slot: number | null;
  slotToken: number | null;
  tick: Date | null;
  startedAt: Date;
  endedAt: Date;
  result: 'succeeded' | 'failed' | 'lost';
  error?: unknown;
  releaseError?: LeaseApiError;
  value?: T;
}

export interface SkipReport {
  jobId: string;
  owner: string;
  result: 'skipped';
  code: 'lease_held' | 'tick_done' | 'job_paused' | 'tick_ahead' | 'too_soon' | 'group_full';
  error?: LeaseApiError;
}

export interface Grant {
  result: 'granted';
  lease: Lease;
  readonly signal: AbortSignal;
  readonly done: Promise<RunReport>;
  execute<T>(fn: (ctx: RunContext) => T | Promise<T>): Promise<RunReport<T>>;
  abandon(reason?: string): Promise<RunReport>;
}

export interface RunnerOptions {
  owner?: string;
  ttlMs?: number;
  heartbeatIntervalMs?: number;
  marginMs?: number;
  requestTimeoutMs?: number;
  acquireWaitMs?: number;
  owedPollIntervalMs?: number;
  logger?: Logger;
  /** Send the acquires and heartbeats of one turn of the event loop in batches (default true). */
  batch?: boolean;
}

export const RETRIED_REFUSALS: Set<string>;
/** Until when (epoch ms) an acquire refused group_full is retried. */
export function groupFullUntil(args: { tick?: Date; graceMs?: number; refusal: LeaseApiError; now: number; acquireWaitMs: number }): number;
export function defaultOwner(): string;

export class Runner {
  constructor(client: Client, options?: RunnerOptions);
  readonly client: Client;
  readonly owner: string;
  readonly ttlMs: number;
  readonly batch: boolean;
  readonly log: Logger;
  run<T>(jobId: string, fn: (ctx: RunContext) => T | Promise<T>, options?: RunOptions): Promise<RunReport<T> | SkipReport>;
  acquire(jobId: string, options?: RunOptions): Promise<Grant | SkipReport>;
  watchOwed(jobId: string, fn: (ctx: RunContext) => unknown, options?: RunOptions): void;
  pollOwed(): Promise<Array<Promise<unknown>>>;
  shutdown(): Promise<void>;
}

/** The subset of node-cron's module that LeaseCoordinator uses. */
interface NodeCronLike {
  schedule(expression: string, fn: (context: any) => unknown, options?: Record<string, unknown>): unknown;
}

export interface LeasedTaskOptions extends Omit<RunOptions, 'tick' | 'nearestTick' | 'schedule'> {
  jobId?: string;
  timezone?: string;
  [nodeCronOption: string]: unknown;
}

/** A node-cron (>= 4.4) RunCoordinator backed by leaseapi. */
export class LeaseCoordinator {
  constructor(runner: Runner);
  /** Returns node-cron's ScheduledTask. */
  schedule(cron: NodeCronLike, expression: string, name: string, fn: (ctx: RunContext & Record<string, unknown>) => unknown, options?: LeasedTaskOptions): unknown;
  shouldRun(key: string, ttlMs?: number): Promise<boolean>;
  onComplete(key: string): Promise<void>;
}

/** Wraps a croner callback so that each tick runs once, under a lease. */
export function leased(
  runner: Runner,
  options: { job: string; schedule?: string } & Omit<RunOptions, 'tick' | 'nearestTick' | 'schedule'>,
  fn: (ctx: RunContext & { cron?: unknown; context?: unknown }) => unknown,
): (cron: unknown, context: unknown) => Promise<RunReport | SkipReport | { jobId: string; owner: string; result: 'error'; error: unknown }>;
