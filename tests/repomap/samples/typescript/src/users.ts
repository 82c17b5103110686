import { Repository, Role, User, UserId } from './types';

export class UserRepository implements Repository<User> {
  private users = new Map<UserId, User>();

  get(id: UserId): User | undefined {
    return this.users.get(id);
  }

  save(user: User): void {
    this.users.set(user.id, user);
  }

  admins(): User[] {
    return [...this.users.values()].filter((u) => u.role === Role.Admin);
  }
}

export function createUser(id: UserId, name: string): User {
  return { id, name, role: Role.Member };
}
