/** Usage of `plan resize`, shared by the help text and the command's own errors. */
export const PLAN_USAGE =
  'cloudops plan resize <project> <vmid> [cores=N] [ram=N] [disk=N] [cpu=regular|light] [wan=off|ipv4|ipv6|dual] [private=off|on] [--stopped] [--two-step] [--at ISO] [--json]';

/** `cloudops report`'s usage line. */
export const REPORT_USAGE =
  'cloudops report --from YYYY-MM-DD --to YYYY-MM-DD [--project NAME] [--format csv|html|json] [--out FILE]';
