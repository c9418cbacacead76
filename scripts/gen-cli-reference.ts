/**
 * `npm run docs`: writes docs/cli-reference.md from oclif.manifest.json (built by `npm run build`) and the topics
 * in package.json: every command with its description, usage, arguments, flags and examples, so the reference
 * says exactly what `--help` says. `--check` only compares and exits 1 when the committed file is stale.
 * oclif's own readme generator writes a README section; we want a standalone page, hence this small script.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface ManifestFlag {
  name: string;
  char?: string;
  description?: string;
  helpGroup?: string;
  type: 'boolean' | 'option';
  helpValue?: string;
  options?: string[];
  default?: unknown;
  multiple?: boolean;
  required?: boolean;
  allowNo?: boolean;
}

interface ManifestArg {
  name: string;
  description?: string;
  options?: string[];
  required?: boolean;
  default?: unknown;
}

type Example = string | { description?: string; command: string };

interface ManifestCommand {
  id: string;
  summary?: string;
  description?: string;
  examples?: Example[];
  args: Record<string, ManifestArg>;
  flags: Record<string, ManifestFlag>;
  hidden?: boolean;
  enableJsonFlag?: boolean;
}

export interface Manifest {
  commands: Record<string, ManifestCommand>;
}

export interface PackageJson {
  oclif: { bin: string; topics?: Record<string, { description: string }> };
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REFERENCE_FILE = path.join(ROOT, 'docs/cli-reference.md');

export function renderCliReference(manifest: Manifest, pjson: PackageJson): string {
  const bin = pjson.oclif.bin;
  const commands = Object.values(manifest.commands)
    .filter((c) => !c.hidden)
    .sort((a, b) => a.id.localeCompare(b.id));
  const spaced = (id: string) => id.replaceAll(':', ' ');
  const template = (text: string, id: string) =>
    text.replaceAll('<%= config.bin %>', bin).replaceAll('<%= command.id %>', spaced(id));

  const out: string[] = [
    '# CLI reference',
    '',
    `<!-- Generated from the commands by \`npm run docs\` (scripts/gen-cli-reference.ts). Do not edit by hand. -->`,
    '',
    `Every command also answers \`${bin} <command> --help\`. Commands:`,
    '',
    ...commands.map(
      (c) =>
        `- [\`${bin} ${spaced(c.id)}\`](#${anchor(`${bin} ${spaced(c.id)}`)}): ${oneLine(c.summary ?? c.description ?? '')}`,
    ),
    '',
  ];

  const topics = Object.entries(pjson.oclif.topics ?? {}).filter(([name]) =>
    commands.some((c) => c.id.startsWith(`${name}:`)),
  );
  if (topics.length > 0) {
    out.push('## Topics', '', '| topic | what it is for |', '| --- | --- |');
    for (const [name, topic] of topics) out.push(`| \`${bin} ${name}\` | ${cell(topic.description)} |`);
    out.push('');
  }

  const globalFlags = new Map<string, ManifestFlag>();
  for (const c of commands)
    for (const f of Object.values(c.flags))
      if (f.helpGroup === 'GLOBAL' && f.name !== 'json') globalFlags.set(f.name, f);
  if (globalFlags.size > 0) {
    out.push('## Global flags', '', 'Every command takes these:', '', ...flagTable([...globalFlags.values()]), '');
  }
  out.push(
    '## Conventions',
    '',
    `- \`-h\`, \`--help\` and \`${bin} help <command>\` show a command's help; \`${bin} autocomplete bash|zsh|powershell\` sets up shell completion (oclif's plugin).`,
    `- Where a command's output is structured, \`--json\` and \`-o json\` (\`--output json\`) are the same (\`verify\`, whose \`-o\` has more formats, takes \`--json\` as \`-o json\`).`,
    '- A mistyped command or flag is refused with exit code 2, naming the closest command or flag ("Did you mean --worker-nodes?"); nothing guessed is run.',
    '',
  );

  for (const c of commands) {
    out.push(`## ${bin} ${spaced(c.id)}`, '');
    if (c.summary) out.push(c.summary, '');
    if (c.description) out.push(template(c.description, c.id), '');
    const args = Object.values(c.args);
    const ownFlags = Object.values(c.flags).filter((f) => f.helpGroup !== 'GLOBAL');
    const usage = [
      `${bin} ${spaced(c.id)}`,
      ...args.map((a) => (a.required ? a.name.toUpperCase() : `[${a.name.toUpperCase()}]`)),
      ...(ownFlags.length > 0 ? ['[FLAGS]'] : []),
      ...(c.enableJsonFlag ? ['[--json]'] : []),
    ].join(' ');
    out.push('Usage:', '', '```sh', usage, '```', '');
    if (args.length > 0) {
      out.push('| argument | meaning |', '| --- | --- |');
      for (const a of args) {
        const extra = [
          a.options ? `one of: ${a.options.join(', ')}` : '',
          a.default !== undefined ? `default: ${String(a.default)}` : '',
        ]
          .filter(Boolean)
          .join('; ');
        out.push(`| \`${a.name.toUpperCase()}\` | ${cell(a.description ?? '')}${extra ? ` (${extra})` : ''} |`);
      }
      out.push('');
    }
    if (ownFlags.length > 0) out.push(...flagTable(ownFlags), '');
    if (c.enableJsonFlag) out.push('`--json` prints the result as JSON (errors too, as `{"error": {...}}`).', '');
    if (c.examples && c.examples.length > 0) {
      out.push('Examples:', '', '```sh');
      for (const e of c.examples) {
        if (typeof e === 'string') {
          out.push(template(e, c.id));
        } else {
          if (e.description) out.push(`# ${template(e.description, c.id)}`);
          out.push(template(e.command, c.id));
        }
      }
      out.push('```', '');
    }
  }
  return `${out.join('\n').trimEnd()}\n`;
}

function flagTable(flags: ManifestFlag[]): string[] {
  const rows = ['| flag | meaning |', '| --- | --- |'];
  for (const f of flags) {
    const value = f.type === 'option' ? `=${f.helpValue ?? `<${f.name}>`}` : '';
    const name = `${f.char ? `-${f.char}, ` : ''}--${f.name}${value}`;
    const extra = [
      f.options ? `one of: ${f.options.join(', ')}` : '',
      f.default !== undefined && f.default !== '' && f.type === 'option' ? `default: ${String(f.default)}` : '',
      f.multiple ? 'repeatable' : '',
      f.required ? 'required' : '',
    ]
      .filter(Boolean)
      .join('; ');
    rows.push(`| \`${name}\` | ${cell(f.description ?? '')}${extra ? ` (${extra})` : ''} |`);
  }
  return rows;
}

function oneLine(text: string): string {
  return text.split('\n')[0]!.trim();
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** GitHub's heading anchors: lower case, spaces to hyphens, punctuation dropped. */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replaceAll(' ', '-')
    .replace(/[^a-z0-9_-]/g, '');
}

export function renderFromRepo(): string {
  const manifest = JSON.parse(readFileSync(path.join(ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest;
  const pjson = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as PackageJson;
  return renderCliReference(manifest, pjson);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const text = renderFromRepo();
  if (process.argv.includes('--check')) {
    const current = readFileSync(REFERENCE_FILE, 'utf8');
    if (current !== text) {
      console.error('docs/cli-reference.md is stale: run `npm run docs`.');
      process.exit(1);
    }
  } else {
    writeFileSync(REFERENCE_FILE, text);
    console.log(`wrote ${path.relative(ROOT, REFERENCE_FILE)}`);
  }
}
