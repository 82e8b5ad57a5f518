/**
 * Why an agent's resize passes its `max_monthly_delta` (docs/agents.md), in the sentence the agent reads; undefined
 * when it does not. A difference nobody can tell (a size or a price unknown) never satisfies the bound.
 */
export function agentBoundRefusal(
  agent: { name: string; maxMonthlyDelta?: number },
  monthlyDelta: string | undefined,
  currency: string,
): string | undefined {
  const bound = agent.maxMonthlyDelta;
  if (bound === undefined) return undefined;
  if (monthlyDelta === undefined)
    return `Not requested: agent ${agent.name} may add at most ${bound} ${currency} a month, and the cost of this change is not known.`;
  if (Number(monthlyDelta) > bound)
    return `Not requested: this change adds ${monthlyDelta} ${currency} a month, and agent ${agent.name} may add at most ${bound}.`;
  return undefined;
}
