import type { z } from 'zod'

/** Formats a zod issue as `path.to[3].field: message`, the path naming the field. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  let path = ''
  for (const key of issue.path) {
    if (typeof key === 'number') path += `[${key}]`
    else path += path === '' ? String(key) : `.${String(key)}`
  }
  return `${path === '' ? '(root)' : path}: ${issue.message}`
}

/** All issues of a zod error, one per `; `. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map(describeIssue).join('; ')
}
