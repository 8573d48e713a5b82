/**
 * bull-board and express are optional peer dependencies (issue 32): only the `glidemq/bull-board`
 * subpath (src/integrations/bull-board/) and the `ui` command may reach them, the command by a
 * dynamic import when it runs. This test reads every import in src/ and fails on any other path to
 * them, so `import 'glidemq'` and every other command never load them.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from '../helpers/fixtures.js';

const SRC = join(REPO_ROOT, 'src');
const ROOM = join(SRC, 'integrations', 'bull-board') + sep;
const UI_COMMAND = join(SRC, 'cli', 'commands', 'ui.ts');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Static imports and re-exports (not `import()`): what loads with the file. */
function staticImports(text: string): string[] {
  const file = ts.createSourceFile('x.ts', text, ts.ScriptTarget.ES2022, false);
  return file.statements.flatMap((s) =>
    (ts.isImportDeclaration(s) || ts.isExportDeclaration(s)) && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier) ? [s.moduleSpecifier.text] : [],
  );
}

describe('bull-board stays out of the core install path', () => {
  it('only src/integrations/bull-board/ imports @bull-board/* or express, and only ui.ts reaches it, by a dynamic import', () => {
    const problems: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const text = readFileSync(file, 'utf8');
      if (file.startsWith(ROOM) || !/bull-board|express|ejs/.test(text)) continue; // no import of them can hide in the rest
      const name = relative(SRC, file);
      const { importedFiles } = ts.preProcessFile(text, true, true);
      const all = [...new Set(importedFiles.map((f) => f.fileName))];
      for (const spec of all) {
        if (/^@bull-board\/|^express$|^ejs$/.test(spec)) problems.push(`${name} imports ${spec}`);
        if (spec.includes('integrations/bull-board')) {
          if (file !== UI_COMMAND) problems.push(`${name} imports ${spec}`);
          else if (staticImports(text).includes(spec)) problems.push(`${name} imports ${spec} statically: load it with import() when the command runs`);
        }
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('the package exports the adapter as glidemq/bull-board, and the main entry does not load it', async () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { import: string }> };
    expect(pkg.exports['./bull-board']?.import).to.equal('./dist/src/integrations/bull-board/index.js');
    const mod = (await import(join(REPO_ROOT, pkg.exports['./bull-board']!.import))) as Record<string, unknown>;
    expect(mod.GlideMQAdapter).to.be.a('function');
    expect(readFileSync(join(SRC, 'index.ts'), 'utf8')).to.not.match(/bull-board|express/);
  });
});
