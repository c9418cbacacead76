/**
 * The wire formats of the fake AWS: requests of the EC2 and AWS Query protocols (form-encoded `Action=...`
 * with flattened lists: EC2 `Name.1`, Query `Name.member.1`) parsed into a tree, and XML responses and error
 * bodies as the SDK's deserializers expect them (EC2: lists of `<item>`, no Result wrapper; Query: lists of
 * `<member>`, wrapped in `<ActionResult>`).
 */
import { randomUUID } from 'node:crypto';

export type Protocol = 'ec2' | 'query';

/** An error the fake answers with: AWS's code, message and HTTP status. */
export class AwsFault extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

export type Params = Record<string, unknown>;

/**
 * `A.B.1.C=v` → `{A: {B: [{C: 'v'}]}}`. Numeric segments become array positions; Query's `member` and `entry`
 * segments are dropped so both protocols give the same shape.
 */
export function parseForm(body: string): { action: string; params: Params } {
  const root: Params = {};
  const form = new URLSearchParams(body);
  for (const [key, value] of form) {
    if (key === 'Action' || key === 'Version') continue;
    const parts = key.split('.').filter((p) => p !== 'member' && p !== 'entry');
    let node: Record<string, unknown> = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) {
        node[part] = value;
      } else {
        node[part] ??= {};
        node = node[part] as Record<string, unknown>;
      }
    });
  }
  return { action: form.get('Action') ?? '', params: arrays(root) as Params };
}

function arrays(node: unknown): unknown {
  if (node === null || typeof node !== 'object') return node;
  const obj = node as Record<string, unknown>;
  const keys = Object.keys(obj);
  if (keys.length > 0 && keys.every((k) => /^\d+$/.test(k))) {
    return keys.sort((a, b) => Number(a) - Number(b)).map((k) => arrays(obj[k]));
  }
  return Object.fromEntries(keys.map((k) => [k, arrays(obj[k])]));
}

/** A list parameter (`Name.N`), empty when absent. */
export function list<T = Params>(params: Params, name: string): T[] {
  const v = params[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]) as T[];
}

export function str(params: Params, name: string): string | undefined {
  const v = params[name];
  return typeof v === 'string' ? v : undefined;
}

export function num(params: Params, name: string): number | undefined {
  const v = str(params, name);
  return v === undefined ? undefined : Number(v);
}

export function required(params: Params, name: string): string {
  const v = str(params, name);
  if (v === undefined || v === '')
    throw new AwsFault('MissingParameter', `The request must contain the parameter ${name}`);
  return v;
}

/**
 * Refuses a value outside the enum the API reference lists for the parameter (AWS answers ValidationError for the
 * Query services, InvalidParameterValue for EC2), so that a request the real API rejects fails here too.
 */
export function oneOf(params: Params, name: string, allowed: readonly string[], code = 'ValidationError'): void {
  const v = str(params, name);
  if (v !== undefined && !allowed.includes(v))
    throw new AwsFault(
      code,
      `Value '${v}' at '${name}' failed to satisfy constraint: Member must satisfy enum value set: [${allowed.join(', ')}]`,
    );
}

export type XmlValue = string | number | boolean | undefined | null | XmlValue[] | { [key: string]: XmlValue };

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Renders `{name: value}` pairs; arrays become `<name><item|member>…</item|member></name>`. */
export function xml(fields: Record<string, XmlValue>, itemName: string): string {
  return Object.entries(fields)
    .map(([name, value]) => element(name, value, itemName))
    .join('');
}

function element(name: string, value: XmlValue, itemName: string): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return `<${name}>${value.map((v) => element(itemName, v, itemName)).join('')}</${name}>`;
  if (typeof value === 'object') return `<${name}>${xml(value, itemName)}</${name}>`;
  return `<${name}>${escape(String(value))}</${name}>`;
}

const NAMESPACES: Record<string, string> = {
  ec2: 'http://ec2.amazonaws.com/doc/2016-11-15/',
  elasticloadbalancing: 'http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/',
  autoscaling: 'http://autoscaling.amazonaws.com/doc/2011-01-01/',
  iam: 'https://iam.amazonaws.com/doc/2010-05-08/',
};

export function responseBody(service: string, action: string, fields: Record<string, XmlValue>): string {
  const ns = NAMESPACES[service] ?? '';
  const requestId = randomUUID();
  if (service === 'ec2') {
    return `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${ns}"><requestId>${requestId}</requestId>${xml(fields, 'item')}</${action}Response>`;
  }
  return `<${action}Response xmlns="${ns}"><${action}Result>${xml(fields, 'member')}</${action}Result><ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata></${action}Response>`;
}

export function errorBody(service: string, fault: AwsFault): string {
  const requestId = randomUUID();
  const inner = `<Code>${escape(fault.code)}</Code><Message>${escape(fault.message)}</Message>`;
  if (service === 'ec2')
    return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>${inner}</Error></Errors><RequestID>${requestId}</RequestID></Response>`;
  const type = fault.status >= 500 ? 'Receiver' : 'Sender';
  return `<ErrorResponse xmlns="${NAMESPACES[service] ?? ''}"><Error><Type>${type}</Type>${inner}</Error><RequestId>${requestId}</RequestId></ErrorResponse>`;
}

/** EC2 tags on the wire: tagSet of {key, value}; Query services: Tags of {Key, Value}. */
export function ec2Tags(tags: Record<string, string>): XmlValue {
  return Object.entries(tags).map(([key, value]) => ({ key, value }));
}

export function queryTags(tags: Record<string, string>): XmlValue {
  return Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
}

/** Tags from `TagSpecification.N` (EC2) for one resource type. */
export function tagsFromSpecs(params: Params, resourceType: string): Record<string, string> {
  const spec = list(params, 'TagSpecification').find((s) => str(s, 'ResourceType') === resourceType);
  return spec ? tagsFromList(list(spec, 'Tag')) : {};
}

export function tagsFromList(tags: Params[]): Record<string, string> {
  return Object.fromEntries(tags.map((t) => [str(t, 'Key') ?? '', str(t, 'Value') ?? '']));
}
