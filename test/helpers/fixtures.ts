/** Paths of the repository's fixture files, from the compiled test's location (dist/test/...). */
import { fileURLToPath } from 'node:url';

export function fixturePath(...parts: string[]): string {
  return fileURLToPath(new URL(`../../../fixtures/${parts.join('/')}`, import.meta.url));
}

export function valkeyFixture(name: string): string {
  return fixturePath('valkey', `${name}.conf`);
}

/** The repository root (where bin/glidemq lives). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
