// Which model serves each conversation's stream session (llama-server's conv_model_tracker),
// filled when a POST carrying X-Conversation-Id is forwarded, so the stream routes go straight
// to the owning child. Each registration has a ticket: erasing or replacing the entry makes it
// stale, which is how a stop cancels a request still waiting for its model to load.
export class ConversationOwners {
  private readonly owners = new Map<string, { model: string; ticket: number }>();
  private nextTicket = 1;

  /** Registers the conversation's model; returns the ticket, 0 when nothing was registered. */
  remember(conversationId: string, model: string): number {
    if (conversationId === '' || model === '') return 0;
    const ticket = this.nextTicket++;
    this.owners.set(conversationId, { model, ticket });
    return ticket;
  }

  /** False once a stop erased the entry or a newer request replaced it. */
  alive(conversationId: string, ticket: number): boolean {
    return this.owners.get(conversationId)?.ticket === ticket;
  }

  lookup(conversationId: string): string | undefined {
    return this.owners.get(conversationId)?.model;
  }

  forget(conversationId: string): void {
    this.owners.delete(conversationId);
  }
}
