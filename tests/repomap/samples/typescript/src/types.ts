export type UserId = string;

export enum Role {
  Admin,
  Member,
}

export interface User {
  id: UserId;
  name: string;
  role: Role;
}

export interface Repository<T> {
  get(id: UserId): T | undefined;
  save(item: T): void;
}
