// `cloudflare:email` for plain workerd: the Agents SDK imports it for its email features,
// which this example does not use (on Cloudflare the runtime provides it).
export class EmailMessage {
  constructor() {
    throw new Error('email is not available in this Worker');
  }
}
