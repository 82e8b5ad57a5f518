/** What an agent reads first: how asking works here. */
export const INSTRUCTIONS =
  'cloudops resizes and restores VMs of the cloud hosting service under the team’s rules. Plan with plan_resize ' +
  '(nothing is created), ask with request_resize or request_restore: every request is posted in the project’s ' +
  'Slack channel and a person approves it there. Follow a request with get_request and wait_seconds.';
