import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');
const src = join(root, 'src');

/** No function in src/ with more lines of its own than this: a longer one holds several steps. */
const MAX_OWN_LINES = 80;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
}

type FunctionLike =
  | ts.FunctionDeclaration
  | ts.MethodDeclaration
  | ts.ArrowFunction
  | ts.FunctionExpression
  | ts.ConstructorDeclaration
  | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration;

function isFunctionLike(node: ts.Node): node is FunctionLike {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)
  );
}

/** A readable name: its own, else the variable, property or call argument it is written into. */
function nameOf(node: FunctionLike, file: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) {
    const owner = node.parent;
    return `${ts.isClassLike(owner) && owner.name ? owner.name.text : '(class)'}.constructor`;
  }
  const own = 'name' in node && node.name ? node.name.getText(file) : undefined;
  if (own && (ts.isMethodDeclaration(node) || ts.isAccessor(node)) && ts.isClassLike(node.parent))
    return `${node.parent.name?.text ?? '(class)'}.${own}`;
  if (own) return own;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(file);
  if (ts.isCallExpression(parent)) {
    const first = parent.arguments[0];
    const label = first && ts.isStringLiteralLike(first) ? `(${first.text})` : '';
    return `${parent.expression.getText(file).slice(0, 40)}${label} callback`;
  }
  return '(anonymous)';
}

/** The lines a node spans, from its first line to its last. */
function span(node: ts.Node, file: ts.SourceFile): number {
  const first = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
  const last = file.getLineAndCharacterOfPosition(node.getEnd()).line;
  return last - first + 1;
}

/** Every function in the file with its own lines: its span less the span of each function directly nested in it. */
function functionsOf(path: string): { where: string; name: string; own: number }[] {
  const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: { where: string; name: string; own: number }[] = [];
  const nestedSpans = (node: ts.Node): number => {
    let total = 0;
    node.forEachChild((child) => {
      total += isFunctionLike(child) ? span(child, file) : nestedSpans(child);
    });
    return total;
  };
  const visit = (node: ts.Node) => {
    if (isFunctionLike(node)) {
      const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
      found.push({
        where: `${relative(root, path)}:${line}`,
        name: nameOf(node, file),
        own: span(node, file) - nestedSpans(node),
      });
    }
    node.forEachChild(visit);
  };
  visit(file);
  return found;
}

const functions = sources(src).flatMap(functionsOf);

describe('no function in src/ holds several steps', () => {
  it('finds the functions', () => {
    expect(functions.length).toBeGreaterThan(500);
  });

  it(`no function has more than ${MAX_OWN_LINES} lines of its own (nested functions not counted)`, () => {
    const over = functions
      .filter((f) => f.own > MAX_OWN_LINES)
      .sort((a, b) => b.own - a.own)
      .map((f) => `${f.name} (${f.where}): ${f.own} lines of its own`);
    expect(over).toEqual([]);
  });
});
