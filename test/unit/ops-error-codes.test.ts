import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..', '..');
const src = join(root, 'src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? sources(full) : full.endsWith('.ts') ? [full] : [];
  });
}

interface ClassInfo {
  name: string;
  where: string;
  /** The class it extends, as written (`Error`, `UnrecoverableError`, one of ours). */
  base?: string;
  /** Declares `code` itself: a property or a constructor parameter property. */
  declaresCode: boolean;
}

const hasCode = (node: ts.ClassLikeDeclaration): boolean =>
  node.members.some(
    (m) =>
      (ts.isPropertyDeclaration(m) && m.name.getText() === 'code') ||
      (ts.isConstructorDeclaration(m) &&
        m.parameters.some((p) => ts.getModifiers(p)?.length && p.name.getText() === 'code')),
  );

/** Every class declared in src/, by name. */
const classes = new Map<string, ClassInfo>();
for (const path of sources(src)) {
  const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node) => {
    if (ts.isClassDeclaration(node) && node.name) {
      const extended = node.heritageClauses?.find((h) => h.token === ts.SyntaxKind.ExtendsKeyword)?.types[0];
      const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
      classes.set(node.name.text, {
        name: node.name.text,
        where: `${relative(root, path)}:${line}`,
        base: extended?.expression.getText(file),
        declaresCode: hasCode(node),
      });
    }
    node.forEachChild(visit);
  };
  visit(file);
}

/** The chain of classes from this one up to the first that is not ours (`Error`, a library's error class). */
function chain(info: ClassInfo): ClassInfo[] {
  const up = info.base === undefined ? undefined : classes.get(info.base);
  return up ? [info, ...chain(up)] : [info];
}

/** A class is an error when its chain ends in `Error` or in a library's `…Error` class (bullmq's UnrecoverableError). */
const errors = [...classes.values()].filter((c) => {
  const top = chain(c).at(-1)?.base;
  return top !== undefined && /(^|[A-Za-z])Error$/.test(top);
});

describe('one error set: every error class is named …Error and carries a stable code', () => {
  it('finds the error classes', () => {
    expect(errors.length).toBeGreaterThan(20);
  });

  it('every error class is named …Error', () => {
    expect(errors.filter((c) => !c.name.endsWith('Error')).map((c) => `${c.name} (${c.where})`)).toEqual([]);
  });

  it('every error class has a code, its own or from an error class of ours it extends', () => {
    expect(
      errors.filter((c) => !chain(c).some((k) => k.declaresCode)).map((c) => `${c.name} (${c.where})`),
    ).toEqual([]);
  });
});
